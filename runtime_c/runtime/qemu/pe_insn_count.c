/*
 * pe_insn_count.c - a QEMU TCG plugin (plugin API version 1, QEMU 7.2) that counts executed
 * guest instructions, exactly and deterministically, in total and per firmware phase.
 *
 * Host code, not firmware: codegen/targets builds it with the host C compiler into a shared
 * object and loads it with  -plugin pe_insn_count.so,out=FILE,mark_lo=A,mark_hi=B,marks=C,
 * nslots=N.  Debian ships no qemu-plugin.h, so the few API functions used are declared
 * below by hand, exactly as QEMU 7.2's include/qemu/qemu-plugin.h declares them.
 *
 * Counting: every instruction of every translated block gets an inline "add 1" to a 64-bit
 * counter (qemu-hexagon translates a packet as one instruction: the count is packets).
 * Phases: the firmware's pe_prof_mark() (runtime_c/runtime/pe_profile.c) stores to
 * pe_prof_marks[2*phase + 0|1]. Instructions inside [mark_lo, mark_hi) - that function -
 * get a store callback; a store to marks + 4*slot is a begin (even slot) or end (odd slot)
 * of phase slot/2, stamped with the counter at that moment. One vCPU (all our boards).
 *
 * Output (written at exit to FILE):
 *     pe-insn-count 1
 *     total <instructions>
 *     phase <id> <completed pairs> <instructions inside them>      (phases with a begin)
 *     unbalanced <ends without a begin>
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the QEMU 7.2 plugin API subset (include/qemu/qemu-plugin.h) ------------------------- */
typedef uint64_t qemu_plugin_id_t;
typedef uint32_t qemu_plugin_meminfo_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef struct qemu_info_t qemu_info_t; /* only passed through */

enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_mem_rw { QEMU_PLUGIN_MEM_R = 1, QEMU_PLUGIN_MEM_W, QEMU_PLUGIN_MEM_RW };

typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_mem_cb_t)(unsigned int vcpu_index, qemu_plugin_meminfo_t info,
                                          uint64_t vaddr, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

#define PE_PLUGIN_EXPORT __attribute__((visibility("default")))

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn,
                                                enum qemu_plugin_op op, void *ptr, uint64_t imm);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_mem_cb_t cb,
                                      enum qemu_plugin_cb_flags flags,
                                      enum qemu_plugin_mem_rw rw, void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
void qemu_plugin_outs(const char *string);

PE_PLUGIN_EXPORT int qemu_plugin_version = 1;

/* ---- state ------------------------------------------------------------------------------ */
#define MAX_PHASES 256

static uint64_t executed;                 /* the inline counter */
static uint64_t mark_lo, mark_hi;         /* pe_prof_mark's code range */
static uint64_t marks_addr;               /* &pe_prof_marks[0] */
static uint64_t nslots;                   /* 2 * phases */
static char out_path[4096];

static uint64_t began_at[MAX_PHASES];
static uint32_t depth[MAX_PHASES];
static uint64_t phase_insns[MAX_PHASES];
static uint64_t phase_pairs[MAX_PHASES];
static bool phase_seen[MAX_PHASES];
static uint64_t unbalanced;

static void on_mark_store(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr,
                          void *userdata)
{
    uint64_t slot, phase;
    (void)vcpu;
    (void)userdata;
    /* QEMU 7.2 calls back for loads too despite the QEMU_PLUGIN_MEM_W filter: check */
    if (!qemu_plugin_mem_is_store(info) || vaddr < marks_addr
        || vaddr >= marks_addr + 4u * nslots) {
        return;
    }
    slot = (vaddr - marks_addr) / 4u;
    phase = slot / 2u;
    if (phase >= MAX_PHASES) {
        return;
    }
    phase_seen[phase] = true;
    if ((slot & 1u) == 0u) {
        if (depth[phase]++ == 0u) {
            began_at[phase] = executed;
        }
    } else if (depth[phase] == 0u) {
        unbalanced++;
    } else if (--depth[phase] == 0u) {
        phase_insns[phase] += executed - began_at[phase];
        phase_pairs[phase]++;
    }
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    size_t i;
    (void)id;
    for (i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t pc = qemu_plugin_insn_vaddr(insn);
        qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &executed, 1);
        if (nslots != 0u && pc >= mark_lo && pc < mark_hi) {
            qemu_plugin_register_vcpu_mem_cb(insn, on_mark_store, QEMU_PLUGIN_CB_NO_REGS,
                                             QEMU_PLUGIN_MEM_W, NULL);
        }
    }
}

static void on_exit_write(qemu_plugin_id_t id, void *userdata)
{
    FILE *f;
    unsigned p;
    (void)id;
    (void)userdata;
    f = fopen(out_path, "w");
    if (f == NULL) {
        qemu_plugin_outs("pe_insn_count: cannot write the output file\n");
        return;
    }
    fprintf(f, "pe-insn-count 1\ntotal %" PRIu64 "\n", executed);
    for (p = 0; p < MAX_PHASES; p++) {
        if (phase_seen[p]) {
            fprintf(f, "phase %u %" PRIu64 " %" PRIu64 "\n", p, phase_pairs[p], phase_insns[p]);
        }
    }
    fprintf(f, "unbalanced %" PRIu64 "\n", unbalanced);
    fclose(f);
}

static bool parse_u64(const char *text, uint64_t *out)
{
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 0);
    if (end == text || *end != '\0') {
        return false;
    }
    *out = (uint64_t)v;
    return true;
}

PE_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                         char **argv)
{
    int i;
    (void)info;
    for (i = 0; i < argc; i++) {
        const char *arg = argv[i];
        const char *eq = strchr(arg, '=');
        size_t klen;
        bool ok = true;
        if (eq == NULL) {
            fprintf(stderr, "pe_insn_count: bad argument '%s'\n", arg);
            return -1;
        }
        klen = (size_t)(eq - arg);
        if (klen == 3 && strncmp(arg, "out", 3) == 0) {
            if (strlen(eq + 1) >= sizeof(out_path)) {
                fprintf(stderr, "pe_insn_count: output path too long\n");
                return -1;
            }
            strcpy(out_path, eq + 1);
        } else if (klen == 7 && strncmp(arg, "mark_lo", 7) == 0) {
            ok = parse_u64(eq + 1, &mark_lo);
        } else if (klen == 7 && strncmp(arg, "mark_hi", 7) == 0) {
            ok = parse_u64(eq + 1, &mark_hi);
        } else if (klen == 5 && strncmp(arg, "marks", 5) == 0) {
            ok = parse_u64(eq + 1, &marks_addr);
        } else if (klen == 6 && strncmp(arg, "nslots", 6) == 0) {
            ok = parse_u64(eq + 1, &nslots);
        } else {
            fprintf(stderr, "pe_insn_count: unknown argument '%s'\n", arg);
            return -1;
        }
        if (!ok) {
            fprintf(stderr, "pe_insn_count: bad number in '%s'\n", arg);
            return -1;
        }
    }
    if (out_path[0] == '\0') {
        fprintf(stderr, "pe_insn_count: out=FILE is required\n");
        return -1;
    }
    if (nslots > 2u * MAX_PHASES) {
        nslots = 2u * MAX_PHASES;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_exit_write, NULL);
    return 0;
}
