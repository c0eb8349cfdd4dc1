#!/usr/bin/env bash
# integrate: the generated model inside an application of one's own (app/), built by that
# application's Makefile through model.mk, run on the PC twice — the second run resumes the
# training state the first one saved — and checked against the golden model.
#
#   bash run.sh                       BOARD=mps2-an386, the first 200 training digits
#   BOARD=mps2-an385 SAMPLES=100 OUT=/tmp/integrate bash run.sh
set -euo pipefail
cd "$(dirname "$0")"
BOARD=${BOARD:-mps2-an386}
SAMPLES=${SAMPLES:-200}
OUT=${OUT:-out}

python3 make_data.py --out "$OUT" --samples "$SAMPLES"

# 1. the model for the board your firmware runs on (no data embedded: the application has its own)
pockengine compile "$OUT/digits_cnn.onnx" --calib "$OUT/calib.npz" --board "$BOARD" \
    --train spec.yaml -o "$OUT/model"
python3 make_data.py --out "$OUT" --samples "$SAMPLES" --samples-for "$OUT/model"

# 2. the application, with the model from model.mk (cmake: see CMakeLists.txt)
make MODEL="$OUT/model" BUILD_DIR="$OUT/build"

# 3. two boots: the second continues from the checkpoint the first one saved
rm -f "$OUT/storage.bin"
APP_SAMPLES="$OUT/samples_1.bin" APP_STORAGE="$OUT/storage.bin" APP_SEND="$OUT/params.bin" \
    "$OUT/build/app" | grep -v '^step '
APP_SAMPLES="$OUT/samples_2.bin" APP_STORAGE="$OUT/storage.bin" APP_SEND="$OUT/params.bin" \
    "$OUT/build/app" | tee "$OUT/app.txt" | grep -v '^step '

# 4. the same training in one go on the golden model: the parameters must be identical
pockengine fit "$OUT/digits_cnn.onnx" --calib "$OUT/calib.npz" --board "$BOARD" \
    --train spec.yaml --data "$OUT/train.npz" --no-shuffle --engine golden | tee "$OUT/golden.txt"
app=$(sha256sum "$OUT/params.bin" | cut -d' ' -f1)
golden=$(grep -o 'params_sha256 [0-9a-f]*' "$OUT/golden.txt" | cut -d' ' -f2)
if [ "$app" != "$golden" ]; then
    echo "integrate: the application's parameters differ from the golden model's" >&2
    exit 1
fi
echo "integrate: the application (two boots) and the golden model agree (params_sha256 $app)"
