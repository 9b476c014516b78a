"""Parses a compiled step's platform spec strictly, as each pinned KFP
release's `kubernetes_executor_config.proto` defines it.

Neither `protoc` nor `grpc_tools` is in the environment (the lock has no
grpcio-tools), so this module reads the pinned `.proto` itself: a small
parser of the proto3 these files use (messages, nested messages, `map<>`,
`oneof`, `repeated`, `optional`, `reserved`, field options, imports) into
a `FileDescriptorProto`, added to a descriptor pool of its own with the
files it imports (`google/protobuf/struct.proto`; `pipeline_spec.proto`
from the installed kfp-pipeline-spec). The message class that pool builds
parses the JSON with protobuf's own `json_format.ParseDict`, which refuses
an unknown field and a value of the wrong type, as Go's `protojson`
(KFP's Argo compiler, `backend/src/v2/compiler/argocompiler/container.go`)
does by default. What it does not model: proto3 `optional` presence (read
as a plain field: the same JSON names and types) and enums (none in these
files).
"""

import hashlib
import os
import re
from typing import Any, Dict, List, Tuple

from google.protobuf import descriptor_pb2
from google.protobuf import descriptor_pool
from google.protobuf import json_format
from google.protobuf import message_factory
from google.protobuf import struct_pb2

PINNED = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'schemas',
                      'kfp')
_HEADER_LINES = 3
_SCALARS = {
    'double': 1, 'float': 2, 'int64': 3, 'uint64': 4, 'int32': 5,
    'fixed64': 6, 'fixed32': 7, 'bool': 8, 'string': 9, 'bytes': 12,
    'uint32': 13, 'sfixed32': 15, 'sfixed64': 16, 'sint32': 17, 'sint64': 18}
_F = descriptor_pb2.FieldDescriptorProto
_TOKEN = re.compile(r'"[^"]*"|[A-Za-z_][A-Za-z0-9_.]*|-?[0-9]+|[{}\[\]<>;=,()]')


def releases() -> List[str]:
  """The releases pinned, oldest first."""
  found = [name[len('kubernetes_executor_config-'):-len('.proto')]
           for name in os.listdir(PINNED) if name.endswith('.proto')]
  return sorted(found, key=lambda r: tuple(int(p) for p in r.split('.')))


def pinned_text(release: str) -> Tuple[str, str]:
  """(upstream's text, the SHA-256 the header records); raises if the text
  is not the bytes the header names."""
  with open(os.path.join(PINNED, f'kubernetes_executor_config-{release}.proto'),
            'rb') as f:  # Bytes: upstream's 2.4 file has CRLF line ends.
    lines = f.read().split(b'\n')
  header, text = lines[:_HEADER_LINES], b'\n'.join(lines[_HEADER_LINES:])
  (recorded,) = re.findall(r'SHA-256 ([0-9a-f]{64})',
                           b'\n'.join(header).decode())
  actual = hashlib.sha256(text).hexdigest()
  assert actual == recorded, (release, actual, recorded)
  return text.decode('utf-8'), recorded


def parse(release: str, config: Dict[str, Any]):
  """`config` (a KubernetesExecutorConfig as JSON) parsed strictly with
  `release`'s pinned .proto; raises json_format.ParseError on a field or
  a value that release does not have."""
  cls = _message_class(release)
  return json_format.ParseDict(config, cls())


_CLASSES: Dict[str, Any] = {}


def _message_class(release: str):
  if release not in _CLASSES:
    text, _ = pinned_text(release)
    pool = descriptor_pool.DescriptorPool()
    for dependency in _dependencies(text):
      _add_with_imports(pool, dependency)
    pool.Add(_ProtoParser(text).file())
    descriptor = pool.FindMessageTypeByName(
        'kfp_kubernetes.KubernetesExecutorConfig')
    _CLASSES[release] = message_factory.MessageFactory(pool).GetPrototype(
        descriptor)
  return _CLASSES[release]


def _dependencies(text: str):
  from kfp.pipeline_spec import pipeline_spec_pb2  # pylint: disable=g-import-not-at-top
  known = {'google/protobuf/struct.proto': struct_pb2.DESCRIPTOR,
           'pipeline_spec.proto': pipeline_spec_pb2.DESCRIPTOR}
  return [known[name] for name in re.findall(r'^import "([^"]+)";', text,
                                             re.M)]


def _add_with_imports(pool, file_descriptor, added=None):
  added = set() if added is None else added
  if file_descriptor.name in added:
    return
  for dependency in file_descriptor.dependencies:
    _add_with_imports(pool, dependency, added)
  proto = descriptor_pb2.FileDescriptorProto()
  file_descriptor.CopyToProto(proto)
  pool.Add(proto)
  added.add(file_descriptor.name)


class _ProtoParser:
  """proto3 text -> FileDescriptorProto (the subset these files use)."""

  def __init__(self, text: str):
    text = re.sub(r'//[^\n]*', '', text)
    text = re.sub(r'/\*.*?\*/', '', text, flags=re.S)
    self._tokens = _TOKEN.findall(text)
    self._at = 0
    self._package = ''
    self._messages: List[str] = []  # Full names, for type references.

  def _next(self) -> str:
    token = self._tokens[self._at]
    self._at += 1
    return token

  def _skip_statement(self):
    while self._next() != ';':
      pass

  def file(self) -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(
        name='kubernetes_executor_config.proto', syntax='proto3')
    bodies = []
    while self._at < len(self._tokens):
      token = self._next()
      if token == 'package':
        self._package = self._next()
        proto.package = self._package
        self._next()
      elif token == 'import':
        proto.dependency.append(self._next().strip('"'))
        self._next()
      elif token == 'message':
        bodies.append(self._message(proto.message_type.add(),
                                    self._package))
      else:  # syntax, option
        self._skip_statement()
    for message, scope in _walk(proto.message_type, self._package):
      for field in message.field:
        if field.type_name and not field.type_name.startswith('.'):
          field.type_name = self._resolve(field.type_name, scope)
    return proto

  def _resolve(self, name: str, scope: str) -> str:
    parts = scope.split('.')
    while parts:
      candidate = '.'.join(parts + [name])
      if candidate in self._messages:
        return '.' + candidate
      parts.pop()
    return '.' + name  # Another file's: ml_pipelines..., google.protobuf...

  def _message(self, message, scope: str):
    message.name = self._next()
    full = f'{scope}.{message.name}'
    self._messages.append(full)
    assert self._next() == '{'
    oneof = None
    while True:
      token = self._next()
      if token == '}':
        if oneof is not None:
          oneof = None
          continue
        return
      if token == 'message':
        self._message(message.nested_type.add(), full)
      elif token == 'oneof':
        oneof = len(message.oneof_decl)
        message.oneof_decl.add(name=self._next())
        assert self._next() == '{'
      elif token in ('reserved', 'option'):
        self._skip_statement()
      elif token == 'map':
        self._map(message, full)
      else:
        self._field(message, token, oneof)

  def _field(self, message, token: str, oneof):
    label = _F.LABEL_OPTIONAL
    if token in ('repeated', 'optional'):
      label = _F.LABEL_REPEATED if token == 'repeated' else label
      token = self._next()
    name = self._next()
    assert self._next() == '='
    field = message.field.add(name=name, number=int(self._next()),
                              label=label, json_name=_json_name(name))
    _set_type(field, token)
    if oneof is not None:
      field.oneof_index = oneof
    self._skip_statement()  # Options ([deprecated = true]) and ';'.

  def _map(self, message, scope: str):
    assert self._next() == '<'
    key = self._next()
    assert self._next() == ','
    value = self._next()
    assert self._next() == '>'
    name = self._next()
    assert self._next() == '='
    number = int(self._next())
    self._skip_statement()
    entry_name = ''.join(p.capitalize() for p in name.split('_')) + 'Entry'
    entry = message.nested_type.add(name=entry_name)
    entry.options.map_entry = True
    self._messages.append(f'{scope}.{entry_name}')
    for index, (field_name, kind) in enumerate((('key', key),
                                                ('value', value)), 1):
      field = entry.field.add(name=field_name, number=index,
                              label=_F.LABEL_OPTIONAL, json_name=field_name)
      _set_type(field, kind)
    message.field.add(name=name, number=number, label=_F.LABEL_REPEATED,
                      type=_F.TYPE_MESSAGE, type_name=entry_name,
                      json_name=_json_name(name))


def _set_type(field, kind: str):
  if kind in _SCALARS:
    field.type = _SCALARS[kind]
  else:
    field.type = _F.TYPE_MESSAGE
    field.type_name = kind


def _json_name(name: str) -> str:
  head, *rest = name.split('_')
  return head + ''.join(p[:1].upper() + p[1:] for p in rest)


def _walk(messages, scope: str):
  for message in messages:
    full = f'{scope}.{message.name}'
    yield message, full
    yield from _walk(message.nested_type, full)
