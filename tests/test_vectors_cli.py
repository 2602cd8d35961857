"""``memidex models list|verify|import|distill`` (src/memidex/cli/models.py) in real
subprocesses of the installed CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from vectorkit import make_onnx_model, make_static_model


def memidex(*args: str, cwd: Path, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memidex", *args], cwd=cwd, capture_output=True,
                          text=True, env={**os.environ, **(env or {})})


def test_import_list_verify_distill(tmp_path: Path) -> None:
    make_onnx_model(tmp_path / "tiny-onnx")
    make_static_model(tmp_path / "tiny-static")
    cache = tmp_path / "cache"
    env = {"MEMIDEX_MODEL_CACHE_DIR": str(cache)}
    out = memidex("models", "import", str(tmp_path / "tiny-onnx"), "--json", cwd=tmp_path,
                  env=env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["change"] == "added" and data["level"] == "memidex" and data["dim"] == 8
    assert data["path"] == str(cache / "tiny-onnx")
    out = memidex("models", "import", str(tmp_path / "tiny-static"), "--name", "floor",
                  cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert "added floor: static model, 6-d, serves the static-floor level" in out.stdout
    out = memidex("models", "list", "--json", cwd=tmp_path, env=env)
    models = json.loads(out.stdout)["models"]
    assert [(m["name"], m["level"], m["ok"]) for m in models] == [
        ("floor", "static-floor", True), ("tiny-onnx", "memidex", True)]
    out = memidex("models", "list", cwd=tmp_path, env=env)
    assert "tiny-onnx" in out.stdout and "memidex" in out.stdout
    # --cache-dir beats the environment
    other = memidex("models", "list", "--json", "--cache-dir", str(tmp_path / "none"),
                    cwd=tmp_path, env=env)
    assert json.loads(other.stdout)["models"] == []
    out = memidex("models", "verify", cwd=tmp_path, env=env)
    assert out.returncode == 0 and "ok     tiny-onnx" in out.stdout
    model = cache / "tiny-onnx" / "model.onnx"
    data_bytes = bytearray(model.read_bytes())
    data_bytes[10] ^= 1
    model.write_bytes(bytes(data_bytes))
    out = memidex("models", "verify", "--json", cwd=tmp_path, env=env)
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert not report["ok"] and "does not match its checksum" in str(report["models"])
    assert "error: 1 model(s) failed verification: tiny-onnx" in out.stderr
    out = memidex("models", "import", str(tmp_path / "tiny-onnx"), "--replace", "--json",
                  cwd=tmp_path, env=env)
    assert json.loads(out.stdout)["change"] == "replaced"
    out = memidex("models", "distill", "--from", "tiny-onnx", "--dims", "4",
                  "--min-fidelity", "-1", "--json", cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["name"] == "tiny-onnx-static"


def test_errors_are_one_line(tmp_path: Path) -> None:
    env = {"MEMIDEX_MODEL_CACHE_DIR": str(tmp_path / "cache")}
    out = memidex("models", "import", str(tmp_path / "missing"), cwd=tmp_path, env=env)
    assert out.returncode == 4
    assert out.stderr.startswith("error: ") and "is not a folder" in out.stderr
    assert "Traceback" not in out.stderr
    make_onnx_model(tmp_path / "m")
    out = memidex("models", "import", str(tmp_path / "m"), "--name", "../up", "--json",
                  cwd=tmp_path, env=env)
    assert out.returncode == 4 and json.loads(out.stdout)["error"]["code"] == "UnsafeModelPath"
    out = memidex("models", "import", str(tmp_path / "m"), "--pooling", "max", cwd=tmp_path,
                  env=env)
    assert out.returncode == 2 and "--pooling 'max'" in out.stderr
    out = memidex("models", "verify", "nothing", cwd=tmp_path, env=env)
    assert out.returncode == 2 and "no model 'nothing'" in out.stderr
