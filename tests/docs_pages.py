"""Reading the docs as the suite checks them: the pages, their Python
blocks with the marker before each, their links and their anchors.

The marker convention is documented in docs/architecture/docs.md.
"""

import glob
import os
import re
import unicodedata
from typing import Dict, List, NamedTuple, Optional, Set

from conftest import REPO

DOCS = os.path.join(REPO, 'docs')
KINDS = ('run', 'slow', 'excerpt', 'skip')
_FENCE = re.compile(r'^(\s*)(```+|~~~+)\s*([\w+-]*)(.*)$')
_MARKER = re.compile(r'^\s*<!--\s*docs-test:\s*(\w+)\s*(.*)$')
_SNIPPET = re.compile(r'^\s*--8<--\s+"([^"]+)"\s*$')
_SECTION = re.compile(r'^\s*<!--\s*--8<--\s*\[(start|end):[\w-]+\]\s*-->\s*$')
_LINK = re.compile(r'(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?'
                   r'(?:\s+"[^"]*")?\s*\)')
_HEADING = re.compile(r'^(#{1,6})\s+(.*?)\s*#*\s*$')


def pages() -> List[str]:
  """README.md and every Markdown page of docs/, as paths."""
  found = sorted(glob.glob(os.path.join(DOCS, '**', '*.md'), recursive=True))
  return [os.path.join(REPO, 'README.md')] + found


def rel(path: str) -> str:
  return os.path.relpath(path, REPO)


class Block(NamedTuple):
  """A fenced Python block: where it is, its code, and its marker."""
  path: str
  line: int  # 1-based line of the opening fence.
  code: str
  kind: str  # One of KINDS; 'run' when unmarked.
  reason: str  # The marker's parenthesised reason, or its excerpt path.
  prelude: str  # Code inside the marker comment, run before the block.
  marked: bool

  @property
  def id(self) -> str:
    return f'{rel(self.path)}:{self.line}'

  @property
  def included(self) -> Optional[str]:
    """The file a block of one `--8<-- "path"` line shows, else None."""
    lines = [l for l in self.code.splitlines() if l.strip()]
    match = _SNIPPET.match(lines[0]) if len(lines) == 1 else None
    return match.group(1) if match else None


def _marker_before(lines: List[str], fence: int):
  """(kind, reason, prelude, marked) of the comment ending on the line just
  before the fence at index `fence`."""
  end = fence - 1
  while end >= 0 and _SECTION.match(lines[end]):
    end -= 1  # A snippet section's start or end: not a marker.
  if end < 0 or not lines[end].rstrip().endswith('-->'):
    return 'run', '', '', False
  start = end
  while start >= 0 and '<!--' not in lines[start]:
    start -= 1
  if start < 0:
    return 'run', '', '', False
  match = _MARKER.match(lines[start])
  if not match:
    return 'run', '', '', False
  kind, rest = match.group(1), match.group(2)
  body = lines[start + 1:end + 1] if start != end else []
  if start == end:
    rest = rest.rsplit('-->', 1)[0]
  elif body:
    body[-1] = body[-1].rsplit('-->', 1)[0]
  rest = rest.strip()
  if kind == 'excerpt':
    return kind, rest, '', True
  reason = ''
  if rest.startswith('('):
    reason = rest[1:rest.rfind(')')].strip() if ')' in rest else rest[1:]
  return kind, reason, '\n'.join(body).strip('\n'), True


def python_blocks(path: str) -> List[Block]:
  """Every ```python block of the page, with its marker."""
  with open(path, encoding='utf-8') as f:
    lines = f.read().split('\n')
  blocks, i = [], 0
  while i < len(lines):
    match = _FENCE.match(lines[i])
    if not match:
      i += 1
      continue
    indent, fence, language = match.group(1), match.group(2), match.group(3)
    end = i + 1
    while end < len(lines) and not lines[end].strip().startswith(fence):
      end += 1
    if language in ('python', 'py'):
      code = '\n'.join(l[len(indent):] if l.startswith(indent) else l
                       for l in lines[i + 1:end])
      kind, reason, prelude, marked = _marker_before(lines, i)
      blocks.append(Block(path, i + 1, code, kind, reason, prelude, marked))
    i = end + 1
  return blocks


def all_blocks() -> List[Block]:
  return [b for page in pages() for b in python_blocks(page)]


def _without_code(text: str, inline: bool = True) -> str:
  """The page with fenced blocks (and inline code) blanked, lines kept."""
  out, fence = [], None
  for line in text.split('\n'):
    match = _FENCE.match(line)
    if fence is None and match:
      fence = match.group(2)
      out.append('')
    elif fence is not None:
      if line.strip().startswith(fence):
        fence = None
      out.append('')
    else:
      out.append(re.sub(r'`[^`]*`', '``', line) if inline else line)
  return '\n'.join(out)


def expanded(path: str) -> str:
  """The page's text with its `--8<--` includes put in place, as
  pymdownx.snippets does (whole files and `file:section` parts)."""
  with open(path, encoding='utf-8') as f:
    text = f.read()

  def include(match):
    target, _, section = match.group(1).partition(':')
    with open(os.path.join(REPO, target), encoding='utf-8') as f:
      body = f.read()
    if section:
      start = body.index(f'--8<-- [start:{section}]')
      body = body[body.index('\n', start) + 1:body.index(
          f'--8<-- [end:{section}]')]
      body = body.rsplit('\n', 1)[0]
    return body

  return re.sub(r'^--8<--\s+"([^"]+)"\s*$', include, text, flags=re.M)


def slug(title: str) -> str:
  """Python-Markdown's toc slug of a heading (what MkDocs links to)."""
  title = re.sub(r'`([^`]*)`', r'\1', title)
  title = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', title)
  title = re.sub(r'[*_]{2}([^*_]+)[*_]{2}', r'\1', title)
  value = unicodedata.normalize('NFKD', title).encode(
      'ascii', 'ignore').decode('ascii')
  value = re.sub(r'[^\w\s-]', '', value).strip().lower()
  return re.sub(r'[-\s]+', '-', value)


def anchors(path: str) -> Set[str]:
  """The anchors of a page's headings (duplicates numbered as toc does)."""
  seen: Dict[str, int] = {}
  found = set()
  for line in _without_code(expanded(path), inline=False).split('\n'):
    match = _HEADING.match(line)
    if not match:
      continue
    base = slug(match.group(2))
    name = base if base not in seen else f'{base}_{seen[base]}'
    seen[base] = seen.get(base, 0) + 1
    found.add(name)
  return found


class Link(NamedTuple):
  path: str
  line: int
  target: str


def links(path: str) -> List[Link]:
  """The page's Markdown links, outside code."""
  with open(path, encoding='utf-8') as f:
    text = _without_code(f.read())
  found = []
  for number, line in enumerate(text.split('\n'), 1):
    for match in _LINK.finditer(line):
      found.append(Link(path, number, match.group(1)))
  return found


def broken(link: Link) -> Optional[str]:
  """Why a relative link does not resolve, or None (external: not checked)."""
  target = link.target
  if re.match(r'^[a-z][a-z0-9+.-]*:', target):
    return None
  file_part, _, anchor = target.partition('#')
  where = (os.path.normpath(os.path.join(os.path.dirname(link.path),
                                         file_part))
           if file_part else link.path)
  if not os.path.exists(where):
    return f'{file_part} does not exist'
  if anchor:
    if not where.endswith('.md'):
      return f'#{anchor}: anchors are checked in Markdown pages only'
    if anchor not in anchors(where):
      return f'{rel(where)} has no heading #{anchor}'
  return None
