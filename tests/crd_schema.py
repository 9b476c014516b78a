"""Checks a manifest as the Kubernetes API server checks a custom resource
on create, against the CRD a project publishes (pinned in tests/schemas/).

The served version's `openAPIV3Schema` (a structural schema) becomes a JSON
Schema (draft 2020-12) that says what the API server says, with strict field
validation (`kubectl`'s default since 1.27, `--validate=strict`):
  - unknown fields are refused: an object with `properties` (or none and no
    `additionalProperties`) and without `x-kubernetes-preserve-unknown-
    fields: true` gets `additionalProperties: false`; the root `metadata` is
    Kubernetes' ObjectMeta;
  - `required`, less the fields the API server fills from their `default`
    before it validates;
  - `type` (an integer is a JSON integer: 2.0 is refused), `enum`,
    `pattern`, `minLength`/`maxLength`, `minimum`/`maximum`,
    `minItems`/`maxItems`, `minProperties`;
  - `x-kubernetes-int-or-string`: an integer or a string;
  - `x-kubernetes-list-type: map` (no two items with the same keys) and
    `set` (no two equal items);
  - `x-kubernetes-validations`: the CEL rules of the pinned CRDs, each
    translated by hand in `_CEL` below. A rule that compares with
    `oldSelf` is a transition rule, which the API server evaluates only
    on update: skipped. A rule not in the table raises `UnknownRule` when the
    schema is built, so a newly pinned CRD cannot silently lose a check.
What the schema does not say (the projects' admission webhooks) is the
product's to check (`generic_trainer.kubeflow.trainjob`, `tfjob`).
"""

import functools
import json
import os
import re
from typing import Any, Callable, Dict, List, Optional

import jsonschema
import yaml

SCHEMAS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'schemas')
TRAINJOB_CRD = os.path.join(SCHEMAS,
                            'trainer.kubeflow.org_trainjobs-v2.3.0.yaml')
TRAININGRUNTIME_CRD = os.path.join(
    SCHEMAS, 'trainer.kubeflow.org_trainingruntimes-v2.3.0.yaml')
TFJOB_CRD = os.path.join(SCHEMAS, 'kubeflow.org_tfjobs-v1.9.4.yaml')

# Keywords of a structural schema that do not constrain a value on create.
_IGNORED = ('description', 'default', 'format', 'example', 'title',
            'x-kubernetes-map-type', 'x-kubernetes-list-map-keys',
            'x-kubernetes-list-type', 'x-kubernetes-int-or-string',
            'x-kubernetes-preserve-unknown-fields',
            'x-kubernetes-embedded-resource', 'nullable')
_COPIED = ('type', 'enum', 'pattern', 'minLength', 'maxLength', 'minimum',
           'maximum', 'minItems', 'maxItems', 'minProperties',
           'maxProperties', 'uniqueItems', 'multipleOf')
# Kubernetes' ObjectMeta, what a client may set on create.
_OBJECT_META = {
    'type': 'object', 'additionalProperties': False,
    'properties': {
        'name': {'type': 'string'}, 'generateName': {'type': 'string'},
        'namespace': {'type': 'string'},
        'labels': {'type': 'object',
                   'additionalProperties': {'type': 'string'}},
        'annotations': {'type': 'object',
                        'additionalProperties': {'type': 'string'}},
        'finalizers': {'type': 'array', 'items': {'type': 'string'}},
        'ownerReferences': {'type': 'array', 'items': {'type': 'object'}}}}


class UnknownRule(ValueError):
  """A CRD carries a CEL rule `_CEL` does not translate."""


def _has(value: Any, *path: str) -> bool:
  for key in path:
    if not isinstance(value, dict) or key not in value:
      return False
    value = value[key]
  return True


# The CEL rules of the pinned CRDs (`self` is the value the rule sits on),
# as Python predicates of that value.
_CEL: Dict[str, Callable[[Any], bool]] = {
    # TrainJob (trainjob_types.go): the name is an RFC 1035 label.
    "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')":
        lambda s: re.search(r'^[a-z]([-a-z0-9]*[a-z0-9])?$',
                            s.get('metadata', {}).get('name', '')) is not None,
    'size(self.metadata.name) <= 63':
        lambda s: len(s.get('metadata', {}).get('name', '')) <= 63,
    "self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')":
        lambda s: s == '' or re.search(r'^[A-Za-z][A-Za-z0-9+.-]*://.+$',
                                       s) is not None,
    "self in ['trainer.kubeflow.org/trainjob-controller', "
    "'kueue.x-k8s.io/multikueue']":
        lambda s: s in ('trainer.kubeflow.org/trainjob-controller',
                        'kueue.x-k8s.io/multikueue'),
    'has(self.lastUpdatedTime)': lambda s: 'lastUpdatedTime' in s,
    # TrainingRuntime.
    '[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost),'
    'has(self.flux)].filter(x, x).size() <= 1':
        lambda s: sum(k in s for k in ('torch', 'mpi', 'jax', 'xgboost',
                                       'flux')) <= 1,
    'self >= 1': lambda s: s >= 1,
    "!self.exists(c, c == 'node')": lambda s: 'node' not in s,
    "!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == "
    "'InOrder' && self.replicatedJobs.exists(x, has(x.dependsOn)))":
        lambda s: not (
            _has(s, 'startupPolicy') and
            s['startupPolicy'].get('startupPolicyOrder') == 'InOrder' and
            any('dependsOn' in x for x in s.get('replicatedJobs', []))),
    'self.templates.all(t, !has(t.metadata.namespace) || '
    'size(t.metadata.namespace) == 0)':
        lambda s: all(not t.get('metadata', {}).get('namespace')
                      for t in s.get('templates', [])),
}


def _rules(rules: List[Dict[str, str]]) -> List[Dict[str, str]]:
  kept = []
  for rule in rules:
    text = ' '.join(rule['rule'].split())
    if 'oldSelf' in text:  # A transition rule: evaluated on update only.
      continue
    if text not in _CEL:
      raise UnknownRule(
          f'The CRD has the CEL rule {text!r}, which tests/crd_schema.py does '
          f'not translate. Expected one of {sorted(_CEL)}. Add it to _CEL.')
    kept.append({'rule': text, 'message': rule.get('message', text)})
  return kept


def _convert(node: Dict[str, Any]) -> Dict[str, Any]:
  """One structural-schema node as JSON Schema."""
  out: Dict[str, Any] = {}
  for key, value in node.items():
    if key == 'properties':
      out[key] = {name: _convert(sub) for name, sub in value.items()}
    elif key in ('items', 'additionalProperties', 'not'):
      out[key] = _convert(value) if isinstance(value, dict) else value
    elif key in ('anyOf', 'allOf', 'oneOf'):
      out[key] = [_convert(sub) for sub in value]
    elif key == 'required':
      defaulted = {name for name, sub in node.get('properties', {}).items()
                   if 'default' in sub}
      required = [name for name in value if name not in defaulted]
      if required:
        out[key] = required
    elif key == 'x-kubernetes-validations':
      rules = _rules(value)
      if rules:
        out['x-cel'] = rules
    elif key in _COPIED:
      out.setdefault(key, value)
    elif key not in _IGNORED:
      raise ValueError(f'tests/crd_schema.py does not know the keyword {key!r}'
                       f' (in a node with keys {sorted(node)}).')
  if node.get('x-kubernetes-int-or-string') and 'anyOf' not in out:
    out['anyOf'] = [{'type': 'integer'}, {'type': 'string'}]
  if node.get('nullable') and 'type' in out:
    out['type'] = [out['type'], 'null']
  if node.get('x-kubernetes-list-type') == 'map':
    out['x-list-map-keys'] = node.get('x-kubernetes-list-map-keys', [])
  elif node.get('x-kubernetes-list-type') == 'set':
    out['uniqueItems'] = True
  if node.get('x-kubernetes-embedded-resource'):
    out.setdefault('properties', {}).update(
        apiVersion={'type': 'string'}, kind={'type': 'string'},
        metadata=_OBJECT_META)
  is_object = node.get('type') == 'object' or 'properties' in node
  if is_object and 'additionalProperties' not in node and not node.get(
      'x-kubernetes-preserve-unknown-fields'):
    out['additionalProperties'] = False
  return out


def _cel(validator, rules, instance, schema):
  del validator, schema  # Unused.
  for rule in rules:
    try:
      passed = _CEL[rule['rule']](instance)
    except (TypeError, AttributeError, KeyError):
      continue  # A value of the wrong shape, which the schema refuses.
    if not passed:
      yield jsonschema.ValidationError(
          f"{rule['message']} (CEL: {rule['rule']})")


def list_map(validator, keys, instance, schema):
  """`x-kubernetes-list-map-keys`: no two items with the same keys."""
  del validator, schema  # Unused.
  if not isinstance(instance, list):
    return
  seen = set()
  for item in instance:
    if not isinstance(item, dict):
      continue
    key = tuple(json.dumps(item.get(k), sort_keys=True) for k in keys)
    if key in seen:
      yield jsonschema.ValidationError(
          f'Duplicate value: {dict(zip(keys, key))} (a list-map keyed by '
          f'{keys})')
    seen.add(key)


def integer(checker, instance):
  """OpenAPI's integer: a JSON integer, not a bool."""
  del checker  # Unused.
  return isinstance(instance, int) and not isinstance(instance, bool)


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    validators={'x-cel': _cel, 'x-list-map-keys': list_map},
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        'integer', integer))


def schema(crd_path: str, version: Optional[str] = None) -> Dict[str, Any]:
  """The JSON Schema of the CRD's served `version` (the storage one when
  None)."""
  return _schema(crd_path, version)


@functools.lru_cache(maxsize=None)
def _schema(crd_path: str, version: Optional[str]) -> Dict[str, Any]:
  with open(crd_path) as f:
    crd = yaml.load(f, Loader=getattr(yaml, 'CSafeLoader', yaml.SafeLoader))
  served = [v for v in crd['spec']['versions'] if v.get('served')]
  (chosen,) = [v for v in served
               if v['name'] == version or (version is None and v['storage'])]
  root = _convert(chosen['schema']['openAPIV3Schema'])
  root['properties']['metadata'] = _OBJECT_META
  group = crd['spec']['group']
  root['properties']['apiVersion'] = {'const': f"{group}/{chosen['name']}"}
  root['properties']['kind'] = {'const': crd['spec']['names']['kind']}
  root['required'] = sorted(set(root.get('required', [])) |
                            {'apiVersion', 'kind', 'metadata'})
  return root


@functools.lru_cache(maxsize=None)
def _validator(crd_path: str, version: Optional[str]):
  return _Validator(_schema(crd_path, version))


def errors(manifest: Dict[str, Any], crd_path: str,
           version: Optional[str] = None) -> List[str]:
  """What the API server would refuse in `manifest`, one line each
  (`path: message`); empty when it is accepted."""
  found = sorted(_validator(crd_path, version).iter_errors(manifest),
                 key=lambda e: [str(p) for p in e.absolute_path])
  return [f"{'.'.join(str(p) for p in e.absolute_path) or '(root)'}: "
          f'{e.message}' for e in found]


def check(manifest: Dict[str, Any], crd_path: str,
          version: Optional[str] = None) -> None:
  """Fails (AssertionError) with every refusal unless `manifest` passes."""
  found = errors(manifest, crd_path, version)
  assert not found, '\n'.join(found)
