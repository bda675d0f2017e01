#!/usr/bin/env bash
# A serve --index approximate session with SIGHUP reloads at the Delicious shape: the index
# built and saved at the start; a refit model's index rebuilt on SIGHUP; the same file again
# reads the saved index. Run from anywhere; prints the session (serve-session.log holds one).
# Its own folder under $TMPDIR, removed at the end.
set -u
cd "$(dirname "$0")/../../.."
export PYTHONPATH=$PWD
PY=${PYTHON:-python3}
D=$(mktemp -d)
PORT=8123
fit() {  # seed -> model.npz (synthetic Delicious shape, hidden 500, 1 epoch)
  $PY -c "
from ncae_cuda import NCAE; from ncae_cuda.data import datasets
NCAE(device='cpu', feedback='implicit', hidden=(500,), seed=$1).fit(datasets.load('synthetic-delicious'), epochs=1, verbose=False).save('$2')"
}
ask() { for path in "/healthz" "/recommend?user=5&n=5"; do
  echo "\$ curl 'http://127.0.0.1:$PORT$path'"; curl -s "http://127.0.0.1:$PORT$path"; echo; done; }
fit 0 $D/model.npz
echo "\$ python -m ncae_cuda.serve model.npz --index approximate --port $PORT --device cpu"
$PY -m ncae_cuda.serve $D/model.npz --index approximate --port $PORT --device cpu \
  > $D/stdout 2> $D/stderr &
SERVER=$!
until grep -q serving $D/stdout 2>/dev/null; do sleep 0.5; done
cat $D/stderr $D/stdout
ls -l $D | sed 's/^/    /'
ask
fit 1 $D/next.npz && mv $D/next.npz $D/model.npz
echo "\$ (model.npz replaced by another fit) kill -HUP $SERVER"
lines=$(wc -l < $D/stderr)
kill -HUP $SERVER
until grep -q reloaded $D/stderr; do sleep 0.5; done
tail -n +$((lines + 1)) $D/stderr
ask
echo "\$ kill -HUP $SERVER   (the same file again: the saved index is read, not rebuilt)"
lines=$(wc -l < $D/stderr)
kill -HUP $SERVER
until [ "$(grep -c reloaded $D/stderr)" = 2 ]; do sleep 0.5; done
tail -n +$((lines + 1)) $D/stderr
kill -TERM $SERVER; wait $SERVER; echo "exit status $?"
rm -r "$D"
