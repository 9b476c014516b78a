"""The four parts every message of ours has, as a check tests share.

The convention (STYLE.md, Keras's messages): what is wrong first; then what
was expected, in a sentence starting `Expected`, or as Keras says it, `X
must be Y` (or `needs`); then `Received:` (what was received); then what to
do, a sentence opening with an imperative verb of `VERBS` (or 'To ...,
<verb>'). The parts may come in another order (Keras ends with
`Received:`; ours usually end with what to do).
"""

import re

# Verbs an instruction opens with.
VERBS = (
    'Add', 'Call', 'Change', 'Check', 'Choose', 'Connect', 'Convert',
    'Define', 'Delete', 'Drop', 'Fill', 'Fix', 'Free', 'Give', 'Install',
    'Join', 'Keep', 'Leave', 'Lower', 'Make', 'Map', 'Move', 'Name', 'Pass',
    'Point', 'Put', 'Raise', 'Re-run', 'Remove', 'Rename', 'Replace',
    'Return', 'Rerun', 'Run', 'Save', 'Set', 'Train', 'Use', 'Write',
    'Quote', 'Re-save', 'Re-write', 'Read', 'Wire', 'Mark', 'Start', 'Clear',
    'Label', 'Retry', 'Restart', 'Export', 'Build', 'Cast', 'Encode', 'Wrap',
    'Take', 'Parse', 'Serve', 'Look', 'Give', 'Delete', 'Open', 'Update',
    'Stop', 'Wait', 'Try', 'Let', 'Increase', 'Reduce', 'Split', 'Create')

_INSTRUCTION = re.compile(
    r'(?:^|[.:;!?)]\s+|\n)(?:To [^,]+, |If [^,]+, |Either |Or |Then |Else, |'
    r'Otherwise, |Instead, |Here, )?(?:' + '|'.join(map(re.escape, VERBS)) +
    r')\b')


def missing_parts(message: str):
  """The parts `message` lacks: of 'expected', 'received', 'what to do'."""
  missing = []
  if not re.search(r'\b[Ee]xpected\b|\bmust\b|\bneeds\b', message):
    missing.append('expected')
  if 'Received' not in message:
    missing.append('received')
  if not _INSTRUCTION.search(message):
    missing.append('what to do')
  return missing


def assert_four_parts(message: str) -> None:
  missing = missing_parts(message)
  assert not missing, f'the message lacks {missing}: {message}'
