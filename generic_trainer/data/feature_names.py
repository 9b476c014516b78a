"""Names a user gives against the features the data has: which the data
lacks, and the one way that is said.

A label, a weight, `feature_keys`, a canned spec's columns, a model's
inputs and a serving signature's inputs all name features; each check
asks `lacking` which of its names the data does not have, and says it
with `lacks` (the names, "which the data lacks", the nearest name when a
spelling is close, and the names the data has), so that every such
message reads alike and a close spelling is always offered.
"""

import difflib
from typing import Iterable, List, Optional


def lacking(asked: Iterable[str], names: Iterable[str]) -> List[str]:
  """The names of `asked` that are not among `names`, in `asked`'s order."""
  known = set(names)
  return [name for name in asked if name not in known]


def nearest(name: str, names: Iterable[str]) -> Optional[str]:
  """The one of `names` `name` most likely means: the same but for case,
  else a close spelling; None when none is close."""
  names = list(names)
  lowered = {n.lower(): n for n in names}
  if name.lower() in lowered:
    return lowered[name.lower()]
  near = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
  return near[0] if near else None


def did_you_mean(name: str, names: Iterable[str]) -> str:
  """" (did you mean 'species'?)" for the nearest of `names`, or ''."""
  near = nearest(name, names)
  return f' (did you mean {near!r}?)' if near else ''


def lacks(subject: str, missing: List[str], names: Iterable[str],
          has: str = 'The schema has') -> str:
  """"<subject> <missing>, which the data lacks (did you mean 'x'?). <has>:
  a, b, c." The first sentences of the message of a check that found
  `missing` names (from `lacking`) among the data's `names`; the caller
  adds what is expected, what was received and what to do."""
  names = list(names)
  return (f'{subject} {missing}, which the data lacks'
          f'{did_you_mean(missing[0], names)}. {has}: {", ".join(names)}.')
