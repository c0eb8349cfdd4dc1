#!/usr/bin/env bash
# kws_finetune: the MLPerf Tiny keyword spotter learns 12 new synthetic keywords in place on
# an emulated Cortex-M4F; checked against the golden model.
#
#   KWS_MODEL=/path/to/kws_ref_model.tflite bash run.sh
#   BOARD=mps2-an500 EPOCHS=2 PER_CLASS=10 bash run.sh
set -euo pipefail
cd "$(dirname "$0")"
MODEL=${KWS_MODEL:-kws_ref_model.tflite}
BOARD=${BOARD:-mps2-an386}
EPOCHS=${EPOCHS:-3}
PER_CLASS=${PER_CLASS:-20}
OUT=${OUT:-out}

if [ ! -f "$MODEL" ]; then
    echo "kws_finetune: $MODEL not found. Put the MLPerf Tiny keyword-spotting model here" >&2
    echo "  (https://github.com/mlcommons/tiny, benchmark/training/keyword_spotting/" >&2
    echo "  trained_models/kws_ref_model.tflite) or set KWS_MODEL=/path/to/it." >&2
    exit 2
fi

python3 make_data.py --out "$OUT" --per-class "$PER_CLASS"
pockengine compile "$MODEL" --board "$BOARD" --train spec.yaml --data "$OUT/train.npz" \
    --eval "$OUT/eval.npz" --epochs "$EPOCHS" -o "$OUT/$BOARD"
pockengine build "$OUT/$BOARD"
pockengine sim "$OUT/$BOARD" | tee "$OUT/sim.txt"
pockengine fit "$MODEL" --train spec.yaml --engine golden --board "$BOARD" \
    --data "$OUT/train.npz" --eval "$OUT/eval.npz" --epochs "$EPOCHS" | tee "$OUT/golden.txt"
device=$(grep -o 'params_sha256 [0-9a-f]*' "$OUT/sim.txt")
golden=$(grep -o 'params_sha256 [0-9a-f]*' "$OUT/golden.txt")
if [ "$device" != "$golden" ]; then
    echo "kws_finetune: the board's parameters differ from the golden model's" >&2
    exit 1
fi
echo "kws_finetune: $BOARD and the golden model agree ($device)"
