"""Message classes for the XSpace and HLO schemas, from a private descriptor pool.

The `.proto` files beside this module are our own subsets of the published
schemas (same packages, names and field numbers). `tools/gen_proto.sh` compiles
them into `proto/schema.binpb`. Loading that into a pool of our own keeps us
clear of any `tensorflow.profiler` or `xla` classes TensorFlow, JAX or XProf
registered in the default pool, and works with protobuf 4.21 to 7.
"""

from importlib import resources

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_POOL = descriptor_pool.DescriptorPool()
_SET = descriptor_pb2.FileDescriptorSet.FromString(
    (resources.files(__package__) / "proto" / "schema.binpb").read_bytes()
)
for _file in _SET.file:
    _POOL.Add(_file)


def message_class(full_name):
    """The message class for a fully qualified name, e.g. `xla.HloProto`."""
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(full_name))


XSpace = message_class("tensorflow.profiler.XSpace")
XPlane = message_class("tensorflow.profiler.XPlane")
XLine = message_class("tensorflow.profiler.XLine")
XEvent = message_class("tensorflow.profiler.XEvent")
XStat = message_class("tensorflow.profiler.XStat")
