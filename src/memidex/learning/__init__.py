"""The learning core (SPEC §3, docs/learning.md): analysis of failures, candidates
projected from evidence, the curator's decisions, the checks that hold changes back,
the settings and the optional model adapter. Pure: it reads values and returns plans;
it never takes the lease, writes a file or touches the index."""
