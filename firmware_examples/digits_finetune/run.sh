#!/usr/bin/env bash
# digits_finetune: the pretrained digits CNN learns a new domain (inverted, shifted digits)
# in place on an emulated Cortex-M4F, and the result is checked against the golden model.
#
#   bash run.sh                      BOARD=mps2-an386, the whole training split, 2 epochs
#   BOARD=mps2-an385 SAMPLES=200 EPOCHS=1 OUT=/tmp/digits bash run.sh
set -euo pipefail
cd "$(dirname "$0")"
BOARD=${BOARD:-mps2-an386}
EPOCHS=${EPOCHS:-2}
SAMPLES=${SAMPLES:-0}
OUT=${OUT:-out}

python3 make_data.py --out "$OUT" --samples "$SAMPLES"

# 1. the training firmware: model + training graph + data in flash, for the board
pockengine compile "$OUT/digits_cnn.onnx" --board "$BOARD" --train spec.yaml \
    --calib "$OUT/calib.npz" --data "$OUT/train.npz" --eval "$OUT/eval.npz" \
    --epochs "$EPOCHS" -o "$OUT/$BOARD"

# 2. cross-compile; flash and SRAM checked against the board's budget
pockengine build "$OUT/$BOARD"

# 3. train in place on the board's emulator
pockengine sim "$OUT/$BOARD" | tee "$OUT/sim.txt"

# 4. the same fine-tuning on the golden model (NumPy): the parameters must be identical
pockengine fit "$OUT/digits_cnn.onnx" --train spec.yaml --engine golden \
    --board "$BOARD" --calib "$OUT/calib.npz" --data "$OUT/train.npz" \
    --eval "$OUT/eval.npz" --epochs "$EPOCHS" | tee "$OUT/golden.txt"
device=$(grep -o 'params_sha256 [0-9a-f]*' "$OUT/sim.txt")
golden=$(grep -o 'params_sha256 [0-9a-f]*' "$OUT/golden.txt")
if [ "$device" != "$golden" ]; then
    echo "digits_finetune: the board's parameters differ from the golden model's" >&2
    exit 1
fi
echo "digits_finetune: $BOARD and the golden model agree ($device)"
