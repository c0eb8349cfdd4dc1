#!/usr/bin/env bash
# fleet: federated sparse fine-tuning (pockengine fleet, on Flower). The bundled digits CNN
# learns inverted, shifted digits on a fleet of clients that each hold a label-skewed share
# of the samples; the server averages their int8/int32 deltas exactly.
#
#   bash run.sh                      (a) 16 host-engine clients, (b) 2 emulated mps2-an386 boards
#   CLIENTS=8 ROUNDS=3 OUT=/tmp/fleet bash run.sh
#   SKIP_QEMU=1 bash run.sh          only (a)
set -euo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-out}
CLIENTS=${CLIENTS:-16}
ROUNDS=${ROUNDS:-5}
EPOCHS=${EPOCHS:-5}
SPLIT=${SPLIT:-dirichlet:0.5}
SPEC="bias:all+weight:last2,opt=sgd,lr=0.01,momentum=0.9,master_weights=fp32"

mkdir -p "$OUT"
MODEL=$(python3 -c 'from codegen import models; print(models.path("digits_cnn.onnx"))')

# the data: the new domain (inverted digits shifted by one pixel), train and held-back test
python3 - "$OUT" <<'PY'
import sys
import numpy as np
from codegen import models
out = sys.argv[1]
x, y = models.shifted_digits("train")
xe, ye = models.shifted_digits("test")
np.savez(f"{out}/train.npz", x=x, y=y)
np.savez(f"{out}/eval.npz", x=xe, y=ye)
print(f"wrote {out}/train.npz ({len(x)} shifted digits), {out}/eval.npz ({len(xe)})")
PY

# (a) simulated devices: the generated C built for this machine, one client per share,
#     compared with a centralized fine-tune on all samples for ROUNDS x EPOCHS epochs
echo "== (a) $CLIENTS host-engine clients, $SPLIT, $ROUNDS rounds x $EPOCHS local epochs"
pockengine fleet "$MODEL" --train "$SPEC" --data "$OUT/train.npz" --eval "$OUT/eval.npz" \
    --clients "$CLIENTS" --rounds "$ROUNDS" --local-epochs "$EPOCHS" --split "$SPLIT" \
    --engine host --centralized | tee "$OUT/fleet-host.txt"

# (b) two emulated Cortex-M4F boards (mps2-an386 under QEMU, serial firmware), checked
#     against the host engine with the same seed and split: the global parameters must agree
if [ -n "${SKIP_QEMU:-}" ]; then
    echo "fleet: (b) skipped (SKIP_QEMU set)"
    exit 0
fi
for tool in qemu-system-arm arm-none-eabi-gcc; do
    if ! command -v "$tool" >/dev/null; then
        echo "fleet: (b) skipped: $tool is not installed (bash .ci/setup at the repository root)"
        exit 0
    fi
done
BOARD_SAMPLES=${BOARD_SAMPLES:-40}
python3 - "$OUT" "$BOARD_SAMPLES" <<'PY'
import sys
import numpy as np
out, n = sys.argv[1], int(sys.argv[2])
d = np.load(f"{out}/train.npz")
np.savez(f"{out}/train-small.npz", x=d["x"][:n], y=d["y"][:n])
PY
echo "== (b) 2 mps2-an386 boards under QEMU, $BOARD_SAMPLES samples, 2 rounds"
common=(--train "$SPEC" --data "$OUT/train-small.npz" --eval "$OUT/eval.npz" --clients 2
        --rounds 2 --local-epochs 1 --split "$SPLIT")
pockengine fleet "$MODEL" "${common[@]}" --engine mps2-an386 | tee "$OUT/fleet-qemu.txt"
pockengine fleet "$MODEL" "${common[@]}" --engine host --board mps2-an386 \
    | tee "$OUT/fleet-host-small.txt"
device=$(grep -o 'params_sha256 [0-9a-f]*' "$OUT/fleet-qemu.txt")
host=$(grep -o 'params_sha256 [0-9a-f]*' "$OUT/fleet-host-small.txt")
if [ "$device" != "$host" ]; then
    echo "fleet: the boards' global parameters differ from the host engine's" >&2
    exit 1
fi
echo "fleet: mps2-an386 boards and the host engine agree ($device)"
