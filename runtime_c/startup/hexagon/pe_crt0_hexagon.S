/*
 * pe_crt0_hexagon.S - program entry for Hexagon under qemu-hexagon (Linux user mode).
 * The loader has mapped the segments (.data loaded, .bss zeroed); switch to the firmware's
 * own stack (.stack section from the linker script, so its size is fixed and it can be
 * painted), clear the frame pointer and enter C.
 */
    .text
    .p2align 4
    .globl _start
    .type _start, @function
_start:
    r29 = ##__pe_stack_top
    r30 = #0
    r31 = #0
    call pe_hexagon_start
1:
    jump 1b
    .size _start, . - _start

/* an empty writable NOBITS input section: gives the linker script's .stack its flags */
    .section .pe_stack, "aw", @nobits
    .p2align 3
