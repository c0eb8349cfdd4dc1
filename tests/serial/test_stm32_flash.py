"""Flashing through the STM32 UART bootloader (AN3155): the emulator fixture is driven by
Debian's stm32flash (the real client, which keeps the fixture honest) and by pockengine flash
(API and CLI); errors are one clear line."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from codegen.cli import main
from codegen.serial import stm32

from .stm32_bootloader import FLASH_BASE, BootloaderEmulator

IMAGE_BYTES = 64 * 1024


@pytest.fixture
def image(tmp_path):
    data = os.urandom(IMAGE_BYTES)
    path = tmp_path / "image.bin"
    path.write_bytes(data)
    return path, data


def test_stm32flash_writes_and_verifies_64k(image):
    """The real client writes and verifies a 64 KiB image, then reads it back. (-m 8n1: Linux
    pseudo-terminals force CS8 and clear PARENB, which stm32flash's 8e1 check refuses.)"""
    if shutil.which("stm32flash") is None:
        pytest.skip("stm32flash is not installed (apt-get install stm32flash)")
    path, data = image
    with BootloaderEmulator() as bl:
        r = subprocess.run(["stm32flash", "-b", "115200", "-m", "8n1", "-w", str(path), "-v",
                            bl.path], capture_output=True, text=True, timeout=300, check=False)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        assert "Wrote and verified address 0x08010000 (100.00%)" in r.stdout
        assert bytes(bl.flash[:IMAGE_BYTES]) == data
        assert bl.erased == [0, 1, 2, 3]            # the four 16 KiB sectors it covers
        back = path.with_suffix(".read")
        r = subprocess.run(["stm32flash", "-b", "115200", "-m", "8n1", "-r", str(back),
                            "-S", f"0x{FLASH_BASE:08x}:{IMAGE_BYTES}", bl.path],
                           capture_output=True, text=True, timeout=300, check=False)
        assert r.returncode == 0, r.stderr[-2000:]
        assert back.read_bytes() == data


def test_pockengine_flash_writes_verifies_and_starts(image):
    path, data = image
    with BootloaderEmulator() as bl:
        phases = []
        res = stm32.flash(bl.path, stm32.load_image(path, None), go=FLASH_BASE,
                          progress=lambda ph, done, total: phases.append((ph, done, total)))
        assert bytes(bl.flash[:IMAGE_BYTES]) == data
        assert bl.go_address == FLASH_BASE
    assert (res.pid, res.bytes_written, res.pages_erased, res.verified) == \
        (0x413, IMAGE_BYTES, 4, True)
    assert ("verify", IMAGE_BYTES, IMAGE_BYTES) in phases


def test_cli_flash(image, capsys):
    path, data = image
    with BootloaderEmulator() as bl:
        assert main(["flash", "--port", bl.path, "--protocol", "stm32", str(path), "--json"]) == 0
        assert bytes(bl.flash[:IMAGE_BYTES]) == data
    out = capsys.readouterr().out
    assert '"bytes_written": 65536' in out and '"verified": true' in out


def test_flash_needs_the_erase(image):
    """The fixture's flash is NOR flash: writing over old data without erasing fails verify
    (pockengine erases exactly the sectors the image covers, at an offset too)."""
    _, data = image
    with BootloaderEmulator() as bl:
        bl.flash[:] = b"\x00" * len(bl.flash)
        stm32.flash(bl.path, [(FLASH_BASE + 0x10000, data)])
        assert bl.erased == [4]                      # 0x08010000: the 64 KiB sector
        assert bytes(bl.flash[0x10000:0x20000]) == data


def test_flash_an_elf(tmp_path):
    """An ELF's loadable segments go to their physical addresses."""
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc is not installed")
    src = tmp_path / "a.c"
    src.write_text("const unsigned table[300] = {1, 2, 3};\nvoid _start(void) { for (;;) {} }\n")
    elf = tmp_path / "a.elf"
    subprocess.run(["arm-none-eabi-gcc", "-mcpu=cortex-m4", "-mthumb", "-nostdlib",
                    "-Wl,-Ttext=0x08000000", "-o", str(elf), str(src)], check=True)
    pieces = stm32.load_image(elf, None)
    assert pieces[0][0] == FLASH_BASE
    with BootloaderEmulator() as bl:
        stm32.flash(bl.path, pieces)
        for addr, blob in pieces:
            assert bytes(bl.flash[addr - FLASH_BASE:addr - FLASH_BASE + len(blob)]) == blob


@pytest.mark.parametrize("fault,needle", [
    ({"nack": 0x31}, "refused WRITE_MEMORY at 0x08000000 (NACK)"),
    ({"nack": 0x44}, "refused EXTENDED_ERASE (NACK)"),
    ({"silent": True}, "no answer to the sync byte 0x7F within 0.3 s"),
    ({"silent_after": 8}, "no answer to WRITE_MEMORY"),
    ({"pid": 0x123}, "unknown chip id 0x123"),
])
def test_flash_errors_are_one_line(image, capsys, fault, needle):
    path, _ = image
    with BootloaderEmulator(**fault) as bl:
        status = main(["flash", "--port", bl.path, "--timeout", "0.3", str(path)])
    err = capsys.readouterr().err
    assert status == 2
    lines = [ln for ln in err.splitlines() if ln.startswith("pockengine")]
    assert len(lines) == 1 and needle in lines[0], err
    assert "Traceback" not in err


def test_wrong_chip_id_and_oversized_image(tmp_path, capsys):
    img = tmp_path / "big.bin"
    img.write_bytes(b"\x01" * 1024)
    with BootloaderEmulator(pid=0x449) as bl:
        assert main(["flash", "--port", bl.path, "--chip-id", "0x413", str(img)]) == 2
    assert "chip id 0x449, expected 0x413" in capsys.readouterr().err
    with BootloaderEmulator() as bl:
        assert main(["flash", "--port", bl.path, "--address", "0x080ffc01", str(img)]) == 2
    assert "outside the flash" in capsys.readouterr().err
    assert main(["flash", "--port", "/dev/nonexistent-tty", str(img)]) == 2
    assert "cannot open" in capsys.readouterr().err
