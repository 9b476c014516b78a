"""Checks a core Kubernetes object (rbac.authorization.k8s.io/v1: Role,
RoleBinding, ClusterRole, ClusterRoleBinding) as the API server checks it on
create, against Kubernetes' published OpenAPI v3 document pinned in
tests/schemas/ (`RBAC_V1`, see tests/schemas/README.md).

Two layers, each reported as `path: message` lines by `errors`:

1. The schema (`schema_errors`): the document's
   `#/components/schemas/<name>` of the object's kind, found by its
   `x-kubernetes-group-version-kind`, turned into JSON Schema (draft
   2020-12):
     - `$ref: #/components/schemas/X` resolves to `#/$defs/X` (every
       schema of the document is carried under `$defs`);
     - apiVersion and kind must be the group-version-kind's
       (`x-kubernetes-group-version-kind`), and are required, as a manifest
       for `kubectl apply` needs them;
     - unknown fields are refused. The document says no
       `additionalProperties: false`, but the API server decodes a built-in
       type into its Go struct with strict field validation (the default of
       `kubectl` since 1.27, `--validate=strict`; the decoder is
       sigs.k8s.io/json `UnmarshalStrict`, called from
       k8s.io/apimachinery/pkg/runtime/serializer/json/json.go), which
       refuses any key the struct does not have, and the struct's fields are
       exactly the schema's `properties`. So every schema with `properties`
       and no `additionalProperties` gets `additionalProperties: false`;
       a schema with neither (FieldsV1, RawExtension) is free-form JSON, as
       its Go type (raw bytes) is;
     - `required` is kept whole, `default` or not: in a built-in type's
       document a required field's `default` is only its Go zero value
       (`""`), which the API server's validation (layer 2) then refuses
       for roleRef.kind and roleRef.name, subjects[].kind and name.
       roleRef.apiGroup is the one the server would fill
       (pkg/apis/rbac/v1/defaults.go, SetDefaults_RoleBinding); this
       checker refuses it missing all the same, as the document says;
     - `type` (an integer is a JSON integer: 2.0 and True are refused),
       `format` int32/int64 (their ranges) and date-time (RFC 3339);
     - `x-kubernetes-list-type: set` (no two equal items) and `map` (no two
       items with the same `x-kubernetes-list-map-keys`);
     - `x-kubernetes-map-type`, `x-kubernetes-patch-*`: how updates merge,
       nothing to check on create.
   A keyword not known here raises ValueError when the schema is built, so
   a newly pinned document cannot silently lose a check.

2. The API server's validation of the RBAC types (`validation_errors`), Go
   code that no schema carries: kubernetes/kubernetes
   pkg/apis/rbac/validation/validation.go (ValidateRole, ValidatePolicyRule,
   ValidateRoleBinding, ValidateRoleBindingSubject, ValidateRBACName) and
   the ObjectMeta checks it calls (staging/src/k8s.io/apimachinery/pkg/api/
   validation/objectmeta.go ValidateObjectMeta; name and namespace rules
   from k8s.io/apimachinery/pkg/util/validation/validation.go and
   pkg/api/validation/path/name.go).
"""

import datetime
import functools
import json
import os
import re
from typing import Any, Dict, Iterator, List, Tuple

import jsonschema

import crd_schema

SCHEMAS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'schemas')
RBAC_V1 = os.path.join(SCHEMAS,
                       'rbac.authorization.k8s.io_v1-openapi-v1.34.json')
DOCUMENTS = (RBAC_V1,)
RBAC_GROUP = 'rbac.authorization.k8s.io'

_REF_PREFIX = '#/components/schemas/'
# Keywords of the document that do not constrain a value on create.
_IGNORED = ('description', 'default', 'x-kubernetes-map-type',
            'x-kubernetes-patch-strategy', 'x-kubernetes-patch-merge-key',
            'x-kubernetes-list-map-keys', 'x-kubernetes-group-version-kind')
_COPIED = ('type', 'enum', 'required', 'minLength', 'maxLength', 'minimum',
           'maximum', 'minItems', 'maxItems', 'pattern', 'uniqueItems')
# OpenAPI `format`s and what they accept (Go's int32/int64; metav1.Time
# parses RFC 3339, k8s.io/apimachinery/pkg/apis/meta/v1/time.go).
_RFC3339 = re.compile(
    r'^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$')


def _date_time(value: str) -> bool:
  if not _RFC3339.match(value):
    return False
  try:
    datetime.datetime.fromisoformat(value.upper().replace('Z', '+00:00'))
  except ValueError:
    return False
  return True


_FORMATS = {
    'int32': lambda v: -2**31 <= v < 2**31,
    'int64': lambda v: -2**63 <= v < 2**63,
    'date-time': _date_time,
}


def _convert(node: Dict[str, Any]) -> Dict[str, Any]:
  """One schema of the document as JSON Schema."""
  out: Dict[str, Any] = {}
  for key, value in node.items():
    if key == '$ref':
      if not value.startswith(_REF_PREFIX):
        raise ValueError(f'tests/k8s_schema.py resolves only {_REF_PREFIX}'
                         f' references. Received: {value!r}.')
      out[key] = '#/$defs/' + value[len(_REF_PREFIX):]
    elif key == 'properties':
      out[key] = {name: _convert(sub) for name, sub in value.items()}
    elif key in ('items', 'additionalProperties'):
      out[key] = _convert(value) if isinstance(value, dict) else value
    elif key in ('allOf', 'anyOf', 'oneOf'):
      out[key] = [_convert(sub) for sub in value]
    elif key == 'format':
      if value not in _FORMATS:
        raise ValueError(f'tests/k8s_schema.py does not know the format '
                         f'{value!r}. Add it to _FORMATS.')
      out['x-format'] = value
    elif key == 'x-kubernetes-list-type':
      if value == 'set':
        out['uniqueItems'] = True
      elif value == 'map':
        out['x-list-map-keys'] = node.get('x-kubernetes-list-map-keys', [])
      elif value != 'atomic':
        raise ValueError(f'Unknown x-kubernetes-list-type {value!r}.')
    elif key in _COPIED:
      out[key] = value
    elif key not in _IGNORED:
      raise ValueError(f'tests/k8s_schema.py does not know the keyword {key!r}'
                       f' (in a node with keys {sorted(node)}).')
  # Strict field validation: the Go struct has exactly these fields.
  if 'properties' in node and 'additionalProperties' not in node:
    out['additionalProperties'] = False
  return out


def _format(validator, fmt, instance, schema):
  del validator, schema  # Unused.
  check = _FORMATS[fmt]
  if fmt.startswith('int'):
    if isinstance(instance, int) and not isinstance(instance, bool) and (
        not check(instance)):
      yield jsonschema.ValidationError(f'{instance} is out of {fmt} range')
  elif isinstance(instance, str) and not check(instance):
    yield jsonschema.ValidationError(f'{instance!r} is not an RFC 3339 '
                                     'date-time')


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    validators={'x-format': _format, 'x-list-map-keys': crd_schema.list_map},
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        'integer', crd_schema.integer))


@functools.lru_cache(maxsize=None)
def _document(path: str) -> Dict[str, Any]:
  with open(path) as f:
    return json.load(f)


@functools.lru_cache(maxsize=None)
def kinds() -> Dict[Tuple[str, str], Tuple[str, str]]:
  """(apiVersion, kind) -> (document path, schema name), from every pinned
  document's `x-kubernetes-group-version-kind`. A schema that several
  group-versions share (DeleteOptions, WatchEvent) is left out: it is no
  object one creates."""
  found: Dict[Tuple[str, str], Tuple[str, str]] = {}
  for path in DOCUMENTS:
    for name, node in _document(path)['components']['schemas'].items():
      gvks = node.get('x-kubernetes-group-version-kind', [])
      if len(gvks) != 1:
        continue
      (gvk,) = gvks
      api_version = (f"{gvk['group']}/{gvk['version']}" if gvk['group']
                     else gvk['version'])
      found[(api_version, gvk['kind'])] = (path, name)
  return found


def schema(api_version: str, kind: str) -> Dict[str, Any]:
  """The JSON Schema of `kind` in `api_version`.

  Raises:
    KeyError: no pinned document has that kind.
  """
  return _schema(*kinds()[(api_version, kind)])


@functools.lru_cache(maxsize=None)
def _schema(path: str, name: str) -> Dict[str, Any]:
  schemas = _document(path)['components']['schemas']
  root = _convert(schemas[name])
  (gvk,) = schemas[name]['x-kubernetes-group-version-kind']
  api_version = (f"{gvk['group']}/{gvk['version']}" if gvk['group']
                 else gvk['version'])
  root['properties']['apiVersion'] = {'const': api_version}
  root['properties']['kind'] = {'const': gvk['kind']}
  root['required'] = sorted(set(root.get('required', [])) |
                            {'apiVersion', 'kind'})
  root['$defs'] = {other: _convert(node) for other, node in schemas.items()}
  return root


@functools.lru_cache(maxsize=None)
def _validator(path: str, name: str):
  checked = _schema(path, name)
  _Validator.check_schema(checked)
  return _Validator(checked)


def _line(path, message: str) -> str:
  return f"{'.'.join(str(p) for p in path) or '(root)'}: {message}"


def schema_errors(obj: Dict[str, Any]) -> List[str]:
  """Layer 1: what the pinned OpenAPI document refuses in `obj`."""
  if not isinstance(obj, dict):
    return [f'(root): {obj!r} is not an object']
  key = (obj.get('apiVersion'), obj.get('kind'))
  if key not in kinds():
    return [f'(root): no pinned Kubernetes schema has apiVersion '
            f'{key[0]!r} and kind {key[1]!r}; known: {sorted(kinds())}']
  found = _validator(*kinds()[key]).iter_errors(obj)
  found = sorted(found, key=lambda e: [str(p) for p in e.absolute_path])
  return [_line(e.absolute_path, e.message) for e in found]


# k8s.io/apimachinery/pkg/util/validation/validation.go.
_DNS1123_LABEL = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')
_DNS1123_SUBDOMAIN = re.compile(
    r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')
_QUALIFIED_NAME = re.compile(r'^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$')
_LABEL_VALUE = re.compile(r'^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$')


def _is_dns1123_label(value: str) -> bool:
  return len(value) <= 63 and bool(_DNS1123_LABEL.match(value))


def _is_dns1123_subdomain(value: str) -> bool:
  return len(value) <= 253 and bool(_DNS1123_SUBDOMAIN.match(value))


def _is_qualified_name(value: str) -> bool:
  """IsQualifiedName: an optional DNS-1123 subdomain prefix and '/', then
  a name of at most 63 characters."""
  prefix, slash, name = value.rpartition('/')
  if slash and not _is_dns1123_subdomain(prefix):
    return False
  return len(name) <= 63 and bool(_QUALIFIED_NAME.match(name))


def _path_segment_problems(name: str) -> List[str]:
  """pkg/api/validation/path/name.go IsValidPathSegmentName, which
  ValidateRBACName is."""
  if name in ('.', '..'):
    return [f'may not be {name!r}']
  return [f'may not contain {c!r}' for c in ('/', '%') if c in name]


def _meta_errors(meta: Any, namespaced: bool) -> Iterator[str]:
  """ValidateObjectMeta with ValidateRBACName."""
  if not isinstance(meta, dict):
    yield 'metadata: Required value'
    return
  name = meta.get('name') or ''
  if not name and not meta.get('generateName'):
    yield 'metadata.name: Required value: name or generateName is required'
  for problem in _path_segment_problems(name) if name else ():
    yield f'metadata.name: Invalid value: {name!r}: {problem}'
  # A namespaced object's missing namespace is the request's (and a
  # cluster-scoped one's is cleared) before validation: rest.BeforeCreate,
  # staging/src/k8s.io/apiserver/pkg/registry/rest/create.go.
  del namespaced
  namespace = meta.get('namespace') or ''
  if namespace and isinstance(namespace, str) and not _is_dns1123_label(
      namespace):
    yield (f'metadata.namespace: Invalid value: {namespace!r}: a lowercase '
           'RFC 1123 label must consist of lower case alphanumeric '
           "characters or '-', and must start and end with an alphanumeric "
           'character (at most 63)')
  labels = meta.get('labels') or {}
  if isinstance(labels, dict):
    for key, value in labels.items():
      if not _is_qualified_name(key):
        yield f'metadata.labels: Invalid value: {key!r}: not a qualified name'
      if not isinstance(value, str) or len(value) > 63 or (
          not _LABEL_VALUE.match(value)):
        yield (f'metadata.labels: Invalid value: {value!r}: not a valid '
               'label value')
  annotations = meta.get('annotations') or {}
  if isinstance(annotations, dict):
    for key in annotations:
      if not _is_qualified_name(key.lower()):
        yield (f'metadata.annotations: Invalid value: {key!r}: not a '
               'qualified name')


def _rule_errors(rule: Dict[str, Any], path: str,
                 namespaced: bool) -> Iterator[str]:
  """ValidatePolicyRule."""
  if not rule.get('verbs'):
    yield f'{path}.verbs: Required value: verbs must contain at least one value'
  if rule.get('nonResourceURLs'):
    if namespaced:
      yield (f'{path}.nonResourceURLs: Invalid value: namespaced rules '
             'cannot apply to non-resource URLs')
    if rule.get('apiGroups') or rule.get('resources') or rule.get(
        'resourceNames'):
      yield (f'{path}.nonResourceURLs: Invalid value: rules cannot apply to '
             'both regular resources and non-resource URLs')
    return
  if not rule.get('apiGroups'):
    yield (f'{path}.apiGroups: Required value: resource rules must supply at '
           'least one api group')
  if not rule.get('resources'):
    yield (f'{path}.resources: Required value: resource rules must supply at '
           'least one resource')


def _subject_errors(subject: Dict[str, Any], path: str,
                    namespaced: bool) -> Iterator[str]:
  """ValidateRoleBindingSubject."""
  name, kind = subject.get('name') or '', subject.get('kind') or ''
  api_group = subject.get('apiGroup') or ''
  if not name:
    yield f'{path}.name: Required value'
  if kind == 'ServiceAccount':
    # ValidateServiceAccountName: a DNS-1123 subdomain.
    if name and not _is_dns1123_subdomain(name):
      yield (f'{path}.name: Invalid value: {name!r}: a ServiceAccount name '
             'must be a DNS-1123 subdomain')
    if api_group:
      yield (f'{path}.apiGroup: Unsupported value: {api_group!r}: supported '
             "values: ''")
    if not namespaced and not subject.get('namespace'):
      yield f'{path}.namespace: Required value'
  elif kind in ('User', 'Group'):
    # SetDefaults_Subject fills an empty apiGroup of a User or Group.
    if api_group not in ('', RBAC_GROUP):
      yield (f'{path}.apiGroup: Unsupported value: {api_group!r}: supported '
             f'values: {RBAC_GROUP!r}')
  else:
    yield (f'{path}.kind: Unsupported value: {kind!r}: supported values: '
           "'ServiceAccount', 'User', 'Group'")


def validation_errors(obj: Dict[str, Any]) -> List[str]:
  """Layer 2: what the API server's Go validation of the RBAC types refuses
  (pkg/apis/rbac/validation/validation.go); [] for another kind. Run on an
  object the schema accepts."""
  kind = obj.get('kind')
  if obj.get('apiVersion') != f'{RBAC_GROUP}/v1' or kind not in (
      'Role', 'ClusterRole', 'RoleBinding', 'ClusterRoleBinding'):
    return []
  namespaced = kind in ('Role', 'RoleBinding')
  found = list(_meta_errors(obj.get('metadata'), namespaced))
  if kind in ('Role', 'ClusterRole'):
    for i, rule in enumerate(obj.get('rules') or []):
      found += _rule_errors(rule, f'rules.{i}', namespaced)
    return found
  ref = obj.get('roleRef') or {}
  # SetDefaults_RoleBinding fills an empty roleRef.apiGroup.
  if (ref.get('apiGroup') or RBAC_GROUP) != RBAC_GROUP:
    found.append(f"roleRef.apiGroup: Unsupported value: {ref['apiGroup']!r}: "
                 f'supported values: {RBAC_GROUP!r}')
  allowed = ('Role', 'ClusterRole') if namespaced else ('ClusterRole',)
  if ref.get('kind') not in allowed:
    found.append(f"roleRef.kind: Unsupported value: {ref.get('kind')!r}: "
                 f'supported values: {allowed}')
  ref_name = ref.get('name') or ''
  if not ref_name:
    found.append('roleRef.name: Required value')
  found += [f'roleRef.name: Invalid value: {ref_name!r}: {problem}'
            for problem in _path_segment_problems(ref_name)]
  for i, subject in enumerate(obj.get('subjects') or []):
    found += _subject_errors(subject, f'subjects.{i}', namespaced)
  return found


def errors(obj: Dict[str, Any]) -> List[str]:
  """What the API server would refuse in `obj` on create, one line each
  (`path: message`), the schema picked by its apiVersion and kind; empty
  when it is accepted."""
  found = schema_errors(obj)
  if found:
    return found  # Layer 2 reads fields layer 1 has shown well formed.
  return validation_errors(obj)


def check(obj: Dict[str, Any]) -> None:
  """Fails (AssertionError) with every refusal unless `obj` passes."""
  found = errors(obj)
  assert not found, '\n'.join(found)
