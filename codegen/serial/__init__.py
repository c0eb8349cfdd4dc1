"""The serial link to a device: the pockengine protocol's host side (train, eval, pull over a
UART or an emulator's TCP port), the serial firmware of a compiled project, a fault-injecting
proxy for tests, and flashing through the STM32 UART bootloader. See docs/serial-protocol.md.
"""

from .client import Device, DeviceError
from .transport import LinkError, open_port

__all__ = ["Device", "DeviceError", "LinkError", "open_port"]
