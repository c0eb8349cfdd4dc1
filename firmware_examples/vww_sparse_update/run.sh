#!/usr/bin/env bash
# vww_sparse_update: which trainable sets of the MLPerf Tiny person detector fit the
# STM32F746's 320 KiB of SRAM, the firmware of one that fits built for the STM32F746G-DISCO,
# and the same sparse update training in place on an emulated Cortex-M7 (mps2-an500).
#
#   VWW_MODEL=/path/to/vww_96_int8.tflite bash run.sh
set -euo pipefail
cd "$(dirname "$0")"
MODEL=${VWW_MODEL:-vww_96_int8.tflite}
EPOCHS=${EPOCHS:-6}
TRAIN=${TRAIN:-32}
OUT=${OUT:-out}
RUN_BOARD=${RUN_BOARD:-mps2-an500}

if [ ! -f "$MODEL" ]; then
    echo "vww_sparse_update: $MODEL not found. Put the MLPerf Tiny visual-wake-words model" >&2
    echo "  here (https://github.com/mlcommons/tiny, benchmark/training/visual_wake_words/" >&2
    echo "  trained_models/vww_96_int8.tflite) or set VWW_MODEL=/path/to/it." >&2
    exit 2
fi
python3 make_data.py --out "$OUT" --train "$TRAIN"

echo "== 1. what fits the STM32F746G-DISCO (320 KiB SRAM, 1 MiB flash)"
for spec in all bias:all+weight:last2 \
            bias:last8+weight:last4@0.25,opt=sgd,lr=0.05,momentum=0.9 spec.yaml bias:last4; do
    printf "%-58s " "$spec"
    pockengine plan "$MODEL" --train "$spec" --board stm32f746g-disco 2>&1 | head -1 || true
done

echo "== 2. the sparse-update firmware for the STM32F746G-DISCO (Renode board)"
pockengine compile "$MODEL" --board stm32f746g-disco --train spec.yaml \
    --data "$OUT/small.npz" -o "$OUT/stm32f746g-disco"
pockengine build "$OUT/stm32f746g-disco"
pockengine sim "$OUT/stm32f746g-disco" || echo "(not run here: see the reason above)"

echo "== 3. the same training in place on $RUN_BOARD (Cortex-M7 under QEMU)"
pockengine compile "$MODEL" --board "$RUN_BOARD" --train spec.yaml --data "$OUT/train.npz" \
    --eval "$OUT/eval.npz" --epochs "$EPOCHS" -o "$OUT/$RUN_BOARD"
pockengine build "$OUT/$RUN_BOARD"
pockengine sim "$OUT/$RUN_BOARD" | tee "$OUT/sim.txt"
pockengine fit "$MODEL" --train spec.yaml --engine golden --board "$RUN_BOARD" \
    --data "$OUT/train.npz" --eval "$OUT/eval.npz" --epochs "$EPOCHS" | tee "$OUT/golden.txt"
device=$(grep -o 'params_sha256 [0-9a-f]*' "$OUT/sim.txt")
golden=$(grep -o 'params_sha256 [0-9a-f]*' "$OUT/golden.txt")
if [ "$device" != "$golden" ]; then
    echo "vww_sparse_update: the board's parameters differ from the golden model's" >&2
    exit 1
fi
echo "vww_sparse_update: $RUN_BOARD and the golden model agree ($device)"
