#!/usr/bin/env bash
# hexagon_finetune: integer-only fine-tuning on a Hexagon DSP (qemu-hexagon, user mode):
# instruction packets per phase and per kernel, checked against the golden model.
#
#   bash run.sh                           hexagon-v67, 400 samples, 2 epochs
#   BOARD=hexagon-v66 SAMPLES=100 EPOCHS=1 bash run.sh
#   BACKEND=ref bash run.sh               the portable C only (the HVX kernels' gain)
set -euo pipefail
cd "$(dirname "$0")"
BOARD=${BOARD:-hexagon-v67}
EPOCHS=${EPOCHS:-2}
SAMPLES=${SAMPLES:-400}
OUT=${OUT:-out}
BACKEND=${BACKEND:-auto}

python3 make_data.py --out "$OUT" --samples "$SAMPLES"
pockengine compile "$OUT/digits_cnn.onnx" --board "$BOARD" --train spec.yaml \
    --calib "$OUT/calib.npz" --data "$OUT/train.npz" --eval "$OUT/eval.npz" \
    --epochs "$EPOCHS" --backend "$BACKEND" -o "$OUT/$BOARD"
pockengine build "$OUT/$BOARD"
pockengine sim "$OUT/$BOARD" --profile-ops | tee "$OUT/sim.txt"
pockengine fit "$OUT/digits_cnn.onnx" --train spec.yaml --engine golden --board "$BOARD" \
    --calib "$OUT/calib.npz" --data "$OUT/train.npz" --eval "$OUT/eval.npz" \
    --epochs "$EPOCHS" | tee "$OUT/golden.txt"
device=$(grep -o 'params_sha256 [0-9a-f]*' "$OUT/sim.txt")
golden=$(grep -o 'params_sha256 [0-9a-f]*' "$OUT/golden.txt")
if [ "$device" != "$golden" ]; then
    echo "hexagon_finetune: the DSP's parameters differ from the golden model's" >&2
    exit 1
fi
echo "hexagon_finetune: $BOARD and the golden model agree ($device)"
