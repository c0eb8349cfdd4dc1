"""The device-side C on the host: its unit tests under ASan/UBSan, and -Wall -Wextra -Werror
on gcc, clang and arm-none-eabi-gcc (Cortex-M0/M4F/M55)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from .helpers import HOST_FLAGS, SAN_ENV, SERIAL_DIR

ARM_TARGETS = {
    "cortex-m0": ["-mcpu=cortex-m0", "-mthumb"],
    "cortex-m4f": ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"],
    "cortex-m55": ["-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard"],
}
DEVICE_FILES = ("pe_frame.c", "pe_proto.c", "pe_checkpoint.c", "pe_storage_semihosting.c",
                "pe_storage_flash.c", "pe_storage_ram.c")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_unit_tests_under_sanitizers(serial_unit, seed):
    r = subprocess.run([str(serial_unit), "selftest", str(seed)], capture_output=True,
                       text=True, env=os.environ | SAN_ENV, timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "ok"


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_host_compilers_warning_free(cc, tmp_path):
    if shutil.which(cc) is None:
        pytest.skip(f"{cc} is not installed")
    files = list(DEVICE_FILES) + ["pe_storage_file.c"]
    for f in files:
        r = subprocess.run([cc, *HOST_FLAGS, "-pedantic", "-Wshadow", "-Wconversion",
                            "-Wno-sign-conversion", f"-I{SERIAL_DIR}", "-c",
                            str(SERIAL_DIR / f), "-o", str(tmp_path / (f + ".o"))],
                           capture_output=True, text=True, check=False)
        assert r.returncode == 0, f"{cc} {f}:\n{r.stderr}"


@pytest.mark.parametrize("target", sorted(ARM_TARGETS))
def test_arm_none_eabi_warning_free(target, tmp_path):
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc is not installed")
    for f in DEVICE_FILES:
        r = subprocess.run(["arm-none-eabi-gcc", *ARM_TARGETS[target], "-std=c99", "-O2",
                            "-ffreestanding", "-Wall", "-Wextra", "-Werror", "-pedantic", "-Wshadow",
                            f"-I{SERIAL_DIR}", "-c", str(SERIAL_DIR / f),
                            "-o", str(tmp_path / (f + ".o"))], capture_output=True, text=True,
                           check=False)
        assert r.returncode == 0, f"{target} {f}:\n{r.stderr}"


def test_no_malloc_in_device_code():
    for f in DEVICE_FILES:
        text = (SERIAL_DIR / f).read_text()
        for word in ("malloc", "calloc", "realloc", "free(", "alloca"):
            assert word not in text, f"{f} uses {word}"
