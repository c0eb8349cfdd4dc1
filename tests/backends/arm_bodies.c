/* The arm backend's kernel bodies as ordinary external functions (PE_ARM_EXTERN), so that the
 * host tests can call the records generated models inline through ctypes. */
#define PE_ARM_EXTERN 1
#include "pe_arm_add.h"
#include "pe_arm_conv.h"
#include "pe_arm_dw.h"
#include "pe_arm_fc.h"
