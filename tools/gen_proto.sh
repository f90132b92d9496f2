#!/usr/bin/env bash
# Rebuilds xprof_widgets/io/proto/schema.binpb, the descriptor set the package
# loads into a private protobuf pool (see xprof_widgets/io/schema.py).
# We ship a descriptor set, not generated *_pb2.py code: generated code pins the
# protobuf runtime to the protoc version that made it and registers
# `tensorflow.profiler.*` in the global pool, which clashes with TensorFlow or
# XProf loaded in the same kernel. Needs `pip install grpcio-tools`.
set -euo pipefail
cd "$(dirname "$0")/../xprof_widgets/io/proto"
${PYTHON:-python} -m grpc_tools.protoc -I. --include_imports --descriptor_set_out=schema.binpb ./*.proto
echo "wrote $(pwd)/schema.binpb"
