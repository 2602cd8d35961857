"""The secret scan of ``knowledge check``: the secrets file's values and well-known token
shapes (detect-secrets), masked in the output, with an allow-list."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from conftest import make_record, run_cli, write_record
from memidex.records.codec import dump_record
from memidex.records.model import Evidence
from memidex.review.secrets import allow_list, fingerprint, mask, scan_text

AWS = "AKIAIOSFODNN7EXAMPLE"
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def _text(observed: str, body: str = "Plain words.") -> str:
    r = replace(make_record(body=body), evidence=(
        Evidence(run="r-1", test="t", step=0, observed=observed),))
    return dump_record(r)


def test_token_shapes_are_found_with_their_line_and_masked() -> None:
    text = _text(f"key {AWS} shown", body=f"token {GITHUB}")
    findings = scan_text("r.md", text)
    kinds = {f.kind: f for f in findings}
    assert kinds["AWS Access Key"].line == text.splitlines().index(
        next(line for line in text.splitlines() if AWS in line)) + 1
    assert "GitHub Token" in kinds
    shown = str(kinds["AWS Access Key"].problem())
    assert AWS not in shown and "AKIA…" in shown and fingerprint(AWS) in shown


def test_plain_text_and_record_ids_are_not_findings() -> None:
    assert scan_text("r.md", _text("Place order (disabled)")) == []


def test_high_entropy_observed_text_and_secrets_file_values() -> None:
    text = _text("session Zk9xQ2v8Lp4TyR7mWn3Bc6Hd1Jf5Gs0A shown", body="pw is hunter2-x9")
    kinds = {f.kind for f in scan_text("r.md", text, secrets=[("admin_pw", "hunter2-x9")])}
    assert "high-entropy string (base64) in observed text" in kinds
    assert "secret `admin_pw` from the secrets file" in kinds


def test_allow_list_by_value_or_fingerprint(tmp_path: Path) -> None:
    text = _text(f"key {AWS}")
    assert scan_text("r.md", text, allow=[AWS]) == []
    assert scan_text("r.md", text, allow=[fingerprint(AWS)]) == []
    (tmp_path / "memidex.toml").write_text(f'[secrets]\nallow = ["{fingerprint(AWS)}"]\n')
    from memidex.config import load_config

    assert allow_list(load_config(tmp_path)) == {fingerprint(AWS)}
    assert mask("short") == f"s… ({fingerprint('short')})"


def test_check_reports_a_planted_cloud_key(repo: Path) -> None:
    r = replace(make_record(), evidence=(
        Evidence(run="r-1", test="t", step=0, observed=f"env shows {AWS}"),))
    path = write_record(repo, r)
    out = run_cli(repo, "knowledge", "check")
    assert out.returncode == 1
    rel = path.relative_to(repo).as_posix()
    assert f"{rel}:" in out.stdout and "possible AWS Access Key" in out.stdout
    assert AWS not in out.stdout + out.stderr


def test_check_reports_a_secret_typed_by_hand(repo: Path) -> None:
    (repo / ".agent-qa").mkdir(exist_ok=True)
    (repo / ".agent-qa/secrets.yaml").write_text("admin_password: Tr0ub4dor&3\n")
    write_record(repo, make_record(body="Log in with Tr0ub4dor&3 as admin."))
    out = run_cli(repo, "knowledge", "check")
    assert out.returncode == 1 and "secret `admin_password`" in out.stdout
    assert "Tr0ub4dor&3" not in out.stdout
