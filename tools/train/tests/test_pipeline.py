"""End to end on the CPU, as the GPU run does it: gpu_run.sh (train.py --smoke: the three target phases, the drafter,
the no-QAT ablation) on a synthetic staged corpus, then export.py, then the reference loads what was installed.
Checks that the run sends back at most 8 files (the GPU machine's limit) and that every piece arrived."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(TRAIN))
sys.path.insert(0, os.path.join(ROOT, "tools", "reference"))
from msaref.checkpoint import load_model  # noqa: E402


def test_smoke_run_export(tmp_path):
    stage, out, models = tmp_path / "stage", tmp_path / "out", tmp_path / "models"
    stage.mkdir()
    rng = np.random.default_rng(0)
    # a corpus with structure (a repeated phrase) so the losses move
    phrase = rng.integers(0, 4089, size=37)
    train = np.tile(phrase, 400)[:14000].astype(np.uint16)
    train[::11] = rng.integers(0, 4089, size=train[::11].shape)
    train.tofile(stage / "train.bin")
    np.tile(phrase, 100)[:3000].astype(np.uint16).tofile(stage / "heldout.bin")
    with open(stage / "data.json", "w") as f:
        json.dump({"vocab_size": 4096}, f)
    tok = os.path.join(ROOT, "models", "default", "tokenizer.json")
    os.symlink(tok, stage / "tokenizer.json")
    env = dict(os.environ, PYTHON=sys.executable)
    r = subprocess.run(["bash", os.path.join(TRAIN, "gpu_run.sh"), str(stage), str(out), "--smoke", "--steps", "6",
                        "--batch", "2", "--seq", "384", "--kl-rows", "16", "--drafter-steps", "2",
                        "--drafter-batch", "1", "--anchors", "4", "--log-every", "1", "--eval-every", "3",
                        "--eval-windows", "1", "--device", "cpu"], env=env, capture_output=True, text=True,
                       timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    files = sorted(os.listdir(out))
    assert files == sorted(["model.tar", "drafter.tar", "noqat.tar", "train_log.csv", "drafter_log.csv",
                            "noqat_log.csv", "summary.json", "train.log"]), files
    summ = json.load(open(out / "summary.json"))
    assert summ["target"]["steps"] == 6 and summ["noqat"]["steps"] == 6 - summ["target"]["phase_steps"][1]
    r = subprocess.run([sys.executable, os.path.join(TRAIN, "export.py"), str(out), "--model-dir",
                        str(models / "m"), "--noqat-dir", str(models / "n"), "--tokenizer-dir",
                        os.path.join(ROOT, "models", "default")], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    for d in ("m", "n"):
        m, cfg = load_model(str(models / d))
        assert cfg.topk_blocks == 2 and sum(cfg.msa_layers) == 2
        assert os.path.exists(models / d / "tokenizer.json")
    assert os.path.exists(models / "m" / "drafter" / "model.safetensors")
    assert os.path.exists(models / "m" / "training" / "train_log.csv")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
