"""The scheduling verdict comes from the nodes that pass the pod's own constraints (issue 19),
and no headline ever carries placeholder text, whatever the pod asks."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from triage.layers.scheduling.no_candidate import EXCLUSION_CODE, no_candidate_summary

FIXTURES = Path(__file__).parents[1] / "fixtures"
BIN = Path(sys.executable).with_name("gpu-triage")


def why_pending(file: str, ns: str, name: str) -> str:
    p = subprocess.run(
        [str(BIN), "why-pending", name, "-n", ns, "--snapshot", str(FIXTURES / file)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0 and not p.stderr, p.stderr
    return p.stdout


def test_the_one_node_of_the_selected_product_decides_not_the_mismatched_rest() -> None:
    out = why_pending("l40s-too-small.yaml", "research", "video-gen-0")
    headline = out.splitlines()[2]
    assert "selector" not in headline and "nodeSelector" not in headline
    assert "gpu-l40s-01: offers at most 4 nvidia.com/gpu, pod requests 6" in headline
    assert "split the job" in out  # the too-large remediation, not the selector one
    # the mismatched nodes are context, one example
    assert out.count("nodeSelector/affinity nvidia.com/gpu.product=NVIDIA-L40S") == 1


def test_a_cpu_pod_with_a_label_typo_is_told_so_plainly() -> None:
    import yaml

    cases = yaml.safe_load((FIXTURES / "expected.yaml").read_text())
    case = next(c for c in cases if c["file"] == "cpu-pod-label-typo.yaml")
    out = why_pending(case["file"], case["namespace"], case["name"])
    assert out.splitlines()[2] == (
        "  scheduling: no node has the label(s) the pod's nodeSelector asks for: "
        "gpu-triage.io/node-pool=cpu-hihgmem (pod requests 16Gi memory, 4 cpu)"
    )
    assert "driver" not in out.split("[FAIL]")[1].split("[ok]")[0]  # no GPU-node noise
    assert "Owner: nlp-platform" in out


CODES = sorted({*EXCLUSION_CODE.values(), "scheduling.untolerated-taint", "unknown-code"})
GPU_INPUTS = [{}, {"nvidia.com/gpu": 1}, {"nvidia.com/gpu": 6, "nvidia.com/mig-1g.10gb": 2}]
MISSING = [[], ["node-pool=cpu-hihgmem"], ["a=b", "c=with spaces"]]


@pytest.mark.parametrize("code", CODES)
@pytest.mark.parametrize("gpu", GPU_INPUTS)
@pytest.mark.parametrize("missing", MISSING)
def test_no_candidate_headlines_never_show_placeholders(
    code: str, gpu: dict[str, int], missing: list[str]
) -> None:
    text = no_candidate_summary(code, gpu, missing=missing)
    assert text and text[0].islower()
    assert not re.search(r"\{|\}|<[a-z_]+>|requests the pod|\(\)|  |None", text), text
    if not gpu:
        assert "GPU node" not in text or code == "scheduling.no-gpu-nodes"
    for want in gpu.values():
        assert str(want) in text or code == "scheduling.dra-no-matching-device"
