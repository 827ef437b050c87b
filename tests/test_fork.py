"""A process forked after its parent used a model does not hang (torch's CPU threads do not survive a fork)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_FORK_AFTER_USE = """
import os, sys, warnings
import numpy as np
import torch
from lsnpc import LSNPC

rng = np.random.default_rng(0)
X, P = rng.normal(size=(2000, 32)).astype(np.float32), rng.uniform(size=(2000, 10))
# guard=False: the output is always computed, never the base probabilities alone
model = LSNPC(epochs=1, hidden_dim=16, latent_dim=4, warm_start=False, guard=False, n_threads=2,
              random_state=0).fit(X[:100], P[:100])
model.predict_proba(X, P)  # on two threads: torch's thread pool now exists in this process
pid = os.fork()
if pid == 0:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.predict_proba(X, P)  # asks for two threads again
        torch.sigmoid(torch.randn(2000, 2000)).sum()  # the user's own torch work, on torch's setting
    print("child finished;", " ".join(str(w.message) for w in caught), flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
model.predict_proba(X, P)  # the parent keeps its threads
print("parent finished; child exit", os.waitstatus_to_exitcode(status), flush=True)
"""


def test_a_child_forked_after_the_parent_used_a_model_finishes() -> None:
    """The child runs its predictions on one thread, with a warning that says why and what to do, instead of
    waiting forever on threads that were not forked with it."""
    proc = subprocess.Popen([sys.executable, "-c", _FORK_AFTER_USE], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    try:
        out, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the parent and its hung child
        proc.communicate()
        raise AssertionError("the forked child hung") from None
    assert proc.returncode == 0, err
    assert "parent finished; child exit 0" in out, (out, err)
    child = next(line for line in out.splitlines() if line.startswith("child finished"))
    assert "runs on 1 thread" in child and "'spawn' or 'forkserver'" in child
