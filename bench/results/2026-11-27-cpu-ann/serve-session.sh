#!/usr/bin/env bash
# a serve --index approximate session with a SIGHUP reload, at the Delicious shape
set -u
cd /work/wt/ann
export PYTHONPATH=$PWD
PY=/work/venv/bin/python
D=/tmp/annx/demo
rm -f $D/*
fit() {  # seed -> model.npz (synthetic Delicious shape, hidden 500, 1 epoch)
  $PY -c "
from ncae_cuda import NCAE; from ncae_cuda.data import datasets
NCAE(device='cpu', feedback='implicit', hidden=(500,), seed=$1).fit(datasets.load('synthetic-delicious'), epochs=1, verbose=False).save('$2')"
}
fit 0 $D/model.npz
echo "\$ python -m ncae_cuda.serve $D/model.npz --index approximate --port 8123 --device cpu"
$PY -m ncae_cuda.serve $D/model.npz --index approximate --port 8123 --device cpu > $D/stdout 2> $D/stderr &
SERVER=$!
until grep -q serving $D/stdout 2>/dev/null; do sleep 0.5; done
cat $D/stderr; cat $D/stdout
ls -l $D | sed 's/^/    /'
for path in "/healthz" "/recommend?user=5&n=5"; do echo "\$ curl 'http://127.0.0.1:8123$path'"; curl -s "http://127.0.0.1:8123$path"; echo; done
fit 1 $D/next.npz && mv $D/next.npz $D/model.npz
echo "\$ (model.npz replaced by another fit) kill -HUP $SERVER"
kill -HUP $SERVER
until grep -q reloaded $D/stderr; do sleep 0.5; done
cat $D/stderr | tail -n +3
for path in "/healthz" "/recommend?user=5&n=5"; do echo "\$ curl 'http://127.0.0.1:8123$path'"; curl -s "http://127.0.0.1:8123$path"; echo; done
echo "\$ kill -HUP $SERVER   (the same file again: the saved index is read, not rebuilt)"
kill -HUP $SERVER
sleep 3; tail -n 2 $D/stderr
kill -TERM $SERVER; wait $SERVER; echo "exit status $?"
