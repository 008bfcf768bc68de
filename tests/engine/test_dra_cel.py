"""DRA's CEL selectors as drivers and DeviceClasses write them, evaluated per device; what is
beyond the evaluator is said (None), never guessed."""

from __future__ import annotations

import pytest

from triage.layers.scheduling.dra_cel import device_env, matches

DEVICE = device_env(
    "gpu.example.com",
    {
        "model": {"string": "LATEST-GPU-MODEL"},
        "driverVersion": {"version": "1.2.3"},
        "index": {"int": 3},
        "sharing": {"bool": True},
        "gpu.nvidia.com/productName": {"string": "NVIDIA H100 80GB HBM3"},
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
    },
    {"memory": {"value": "80Gi"}, "cores": "132"},  # the v1 shape and the alpha one
)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('device.driver == "gpu.example.com"', True),
        ("device.driver == 'gpu.nvidia.com'", False),
        ('device.attributes["gpu.example.com"].model == "LATEST-GPU-MODEL"', True),
        ('device.attributes["gpu.example.com"].model != "LATEST-GPU-MODEL"', False),
        ("device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')", True),
        (
            'device.attributes["gpu.example.com"].index >= 3 && device.attributes["gpu.example.com"].sharing',
            True,
        ),
        ('device.attributes["gpu.example.com"].index < 3', False),
        ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0', True),
        ('device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("100Gi"))', False),
        ('device.capacity["gpu.example.com"].cores.compareTo(quantity("100")) > 0', True),
        ('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.2.0"))', True),
        ('device.attributes["gpu.example.com"].driverVersion == semver("1.2.3")', True),
        ('"model" in device.attributes["gpu.example.com"]', True),
        ('has(device.attributes["gpu.example.com"].mig)', False),
        ('device.attributes["gpu.example.com"].model in ["A", "LATEST-GPU-MODEL"]', True),
        ('!(device.driver == "other") || device.attributes["x"].y == 1', True),
        ('device.attributes["resource.kubernetes.io"].pcieRoot.matches("^pci0000")', True),
        # a runtime error (the device lacks the attribute) is no match, as in the scheduler;
        # a decisive other side absorbs it, as CEL's && and || do
        ('device.attributes["gpu.example.com"].mig == true', False),
        (
            'device.attributes["gpu.example.com"].mig == true || device.driver == "gpu.example.com"',
            True,
        ),
        ('device.attributes["gpu.example.com"].model == 3', False),  # no such overload
        # beyond the evaluator: said, not guessed
        ('device.attributes["gpu.example.com"].index + 1 == 4', None),
        ('device.attributes.exists(d, d == "gpu.example.com")', None),
        ("device.driver ==", None),
        ('device.attributes["gpu.example.com"].model.lowerAscii() == "x"', None),
    ],
)
def test_selectors_drivers_write(expression: str, expected: bool | None) -> None:
    assert matches(expression, DEVICE) is expected
