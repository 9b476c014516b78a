"""The docs: the site builds strictly, links resolve, Python blocks run (or
say why not), and the pages that describe the code match it.

The conventions are in docs/architecture/docs.md.
"""

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

import docs_pages
from conftest import REPO, command_env

_BLOCKS = docs_pages.all_blocks()
_NO_TENSORFLOW = textwrap.dedent('''
    import sys as _sys
    assert 'tensorflow' not in _sys.modules, (
        'this block imports TensorFlow: mark it slow (docs/architecture/docs.md)')
''')


def _mkdocs_missing():
  """The docs packages that are not installed, by import name."""
  return [name for name in ('mkdocs', 'material', 'mkdocstrings',
                            'mkdocstrings_handlers.python')
          if importlib.util.find_spec(name.split('.')[0]) is None or
          (name == 'mkdocstrings_handlers.python' and
           importlib.util.find_spec(name) is None)]


def test_site_builds_strictly(tmp_path):
  """`mkdocs build --strict` passes: the nav's pages exist, links and
  anchors resolve, the API pages render from the docstrings, and the
  command's flags page lists every flag of its parser."""
  missing = _mkdocs_missing()
  if missing:
    pytest.skip(f'mkdocs is not installed here (missing: {", ".join(missing)}); '
                'it comes with the docs extra and the pinned lock')
  site = tmp_path / 'site'
  done = subprocess.run(
      [sys.executable, '-m', 'mkdocs', 'build', '--strict', '--quiet',
       '--site-dir', str(site)], cwd=REPO, env=command_env(),
      capture_output=True, text=True, timeout=300, check=False)
  assert done.returncode == 0, done.stdout + done.stderr
  from generic_trainer.command import cli_args  # pylint: disable=g-import-not-at-top
  flags_page = (site / 'reference' / 'command-flags' / 'index.html').read_text()
  for action in cli_args._parser()._actions:  # pylint: disable=protected-access
    for flag in action.option_strings:
      assert f'<code>{flag}</code>' in flags_page, flag


def test_the_nav_names_every_page():
  """Every page of docs/ is in mkdocs.yml's nav (so two clicks find it)."""
  with open(os.path.join(REPO, 'mkdocs.yml'), encoding='utf-8') as f:
    config = f.read()
  nav = set(re.findall(r'^\s*-\s+(?:[^\n]*?:\s+)?([\w./-]+\.md)\s*$',
                       config, flags=re.M))
  pages = {docs_pages.rel(p)[len('docs/'):] for p in docs_pages.pages()[1:]}
  assert pages - nav == set(), 'pages missing from the nav'
  assert nav - pages == set(), 'nav entries without a page'


@pytest.mark.parametrize('page', docs_pages.pages(), ids=docs_pages.rel)
def test_internal_links_resolve(page):
  """Every relative link of README.md and docs/ names a file that exists,
  and a heading of it when it has an #anchor."""
  problems = [f'{docs_pages.rel(l.path)}:{l.line}: ({l.target}) {why}'
              for l in docs_pages.links(page)
              for why in [docs_pages.broken(l)] if why]
  assert not problems, '\n'.join(problems)


def test_link_checker_finds_a_broken_link(tmp_path):
  """The link check can fail: a missing file and a missing anchor."""
  page = tmp_path / 'page.md'
  page.write_text('# Title\n\n[a](missing.md) [b](#nowhere) [c](#title) '
                  '[d](https://example.com/x.md) `[e](inline.md)`\n')
  found = [docs_pages.broken(l) for l in docs_pages.links(str(page))]
  assert found[0] == 'missing.md does not exist'
  assert 'has no heading #nowhere' in found[1]
  assert found[2:] == [None, None]


def test_every_marker_is_known_and_says_why():
  """A block marked `skip` or `slow` gives its reason; `excerpt` its file."""
  problems = []
  for block in _BLOCKS:
    if block.kind not in docs_pages.KINDS:
      problems.append(f'{block.id}: unknown marker docs-test: {block.kind}')
    elif block.kind in ('skip', 'slow') and not block.reason:
      problems.append(f'{block.id}: docs-test: {block.kind} needs '
                      '(the reason)')
    elif block.kind == 'excerpt' and not os.path.isfile(
        os.path.join(REPO, block.reason)):
      problems.append(f'{block.id}: excerpt of {block.reason!r}, which does '
                      'not exist')
  assert not problems, '\n'.join(problems)


def _code_lines(code):
  """The lines an excerpt must match: comments and `...` dropped."""
  for line in code.split('\n'):
    line = re.sub(r'\s+#\s.*$', '', line).strip()
    if line and line != '...' and not line.startswith('#'):
      yield line


@pytest.mark.parametrize(
    'block', [b for b in _BLOCKS if b.kind == 'excerpt'], ids=lambda b: b.id)
def test_excerpts_match_their_files(block):
  """An excerpt's lines appear in the file it quotes, in order."""
  with open(os.path.join(REPO, block.reason), encoding='utf-8') as f:
    source = [l.strip() for l in f.read().split('\n')]
  at = 0
  for line in _code_lines(block.code):
    try:
      at = source.index(line, at) + 1
    except ValueError:
      pytest.fail(f'{block.id}: {line!r} is not in {block.reason} (after '
                  f'line {at})')


def _run(block, tmp_path, timeout):
  script = tmp_path / 'block.py'
  checks = _NO_TENSORFLOW if block.kind == 'run' else ''
  script.write_text(f'{block.prelude}\n{block.code}\n{checks}')
  env = dict(command_env(), TMPDIR=str(tmp_path))
  done = subprocess.run([sys.executable, str(script)], cwd=REPO, env=env,
                        capture_output=True, text=True, timeout=timeout,
                        check=False)
  assert done.returncode == 0, (
      f'{block.id} failed:\n{block.code}\n--- output:\n'
      f'{done.stdout[-3000:]}{done.stderr[-6000:]}')


@pytest.mark.parametrize(
    'block', [b for b in _BLOCKS if b.kind == 'run' and not b.included],
    ids=lambda b: b.id)
def test_python_blocks_run(block, tmp_path):
  """An unmarked Python block of the docs runs, without TensorFlow."""
  _run(block, tmp_path, timeout=60)


_RUN_ALL = textwrap.dedent('''
    import json, sys, traceback
    failed = []
    for block_id, code in json.load(open(sys.argv[1])):
      print(f'== {block_id}', flush=True)
      try:
        exec(compile(code, block_id, 'exec'), {'__name__': '__main__'})
      except BaseException:  # pylint: disable=broad-except
        failed.append(block_id)
        traceback.print_exc()
    print('FAILED: ' + ', '.join(failed) if failed else 'all ran', flush=True)
    sys.exit(1 if failed else 0)
''')


@pytest.mark.slow
def test_slow_python_blocks_run(tmp_path):
  """Every block marked slow (TensorFlow, a training, a pipeline) runs.
  They share one process, so TensorFlow is imported once; each block runs
  in a namespace of its own."""
  blocks = [b for b in _BLOCKS if b.kind == 'slow']
  listing = tmp_path / 'blocks.json'
  listing.write_text(json.dumps([(b.id, f'{b.prelude}\n{b.code}\n')
                                 for b in blocks]))
  runner = tmp_path / 'run_blocks.py'
  runner.write_text(_RUN_ALL)
  env = dict(command_env(), TMPDIR=str(tmp_path))
  done = subprocess.run([sys.executable, str(runner), str(listing)], cwd=REPO,
                        env=env, capture_output=True, text=True, timeout=900,
                        check=False)
  assert done.returncode == 0, (
      f'{done.stdout[-4000:]}\n--- stderr:\n{done.stderr[-8000:]}')


def test_architecture_diagram_lists_the_layers():
  """The diagram of docs/architecture/index.md has tests/test_layout.py's
  LAYERS, top first, then the base with every base module."""
  import test_layout  # pylint: disable=g-import-not-at-top
  with open(os.path.join(docs_pages.DOCS, 'architecture', 'index.md'),
            encoding='utf-8') as f:
    page = f.read()
  diagram = page[page.index('```mermaid'):]
  diagram = diagram[:diagram.index('\n```', 4)]
  labels = re.findall(r'^\s*\w+\["([^"<]*)', diagram, flags=re.M)
  rooms = [[r.strip() for r in label.split('·')] for label in labels]
  assert rooms[:-1] == test_layout.LAYERS
  base_label = labels[-1]
  assert base_label.startswith('base:')
  named = {n.strip().rstrip('/') for n in base_label[5:].split(',')}
  layered = {room for rooms_ in test_layout.LAYERS for room in rooms_}
  package = os.path.join(REPO, 'generic_trainer')
  base = {os.path.splitext(n)[0] for n in os.listdir(package)
          if n.endswith('.py') and n != '__init__.py'} - layered
  assert named == base | set(test_layout.BASE_PACKAGES)


def test_error_classes_table_matches_the_code():
  """docs/reference/checks.md's table of error classes has every class of
  generic_trainer/errors.py with the built-in it refines."""
  with open(os.path.join(REPO, 'generic_trainer', 'errors.py'),
            encoding='utf-8') as f:
    tree = ast.parse(f.read())
  classes = {node.name: [b.id for b in node.bases]
             for node in tree.body if isinstance(node, ast.ClassDef)}
  with open(os.path.join(docs_pages.DOCS, 'reference', 'checks.md'),
            encoding='utf-8') as f:
    rows = re.findall(r'^\| `(\w+)` \| `(\w+)`', f.read(), flags=re.M)
  table = dict(rows)
  expected = {}
  for name, bases in classes.items():
    if name == 'GenericTrainerError':
      continue
    builtin = [b for b in bases if b != 'GenericTrainerError']
    while builtin and builtin[0] in classes:  # A refinement of one of ours.
      builtin = [b for b in classes[builtin[0]] if b != 'GenericTrainerError']
    expected[name] = builtin[0]
  assert table == expected


def test_docs_pages_named_in_the_code_exist():
  """A docstring, comment or message that sends a reader to a docs page
  (`docs/guides/jax.md`) names one that exists."""
  missing = []
  for folder in ('generic_trainer', 'module_files', 'pipelines', 'tests',
                 'benchmarks', 'scripts'):
    for dirpath, _, names in os.walk(os.path.join(REPO, folder)):
      for name in names:
        if not name.endswith('.py'):
          continue
        path = os.path.join(dirpath, name)
        with open(path, encoding='utf-8') as f:
          text = f.read()
        for page in set(re.findall(r'\bdocs/[\w/.-]+\.md\b', text)):
          if not os.path.isfile(os.path.join(REPO, page)):
            missing.append(f'{docs_pages.rel(path)}: {page}')
  assert not missing, '\n'.join(missing)


def test_readme_two_commands_are_the_makefile_s_and_ci_s():
  """The README's two commands are Makefile targets, and the one CI runs
  (.ci/run) is among them, word for word."""
  with open(os.path.join(REPO, 'README.md'), encoding='utf-8') as f:
    readme = f.read()
  section = readme[readme.index('## Two commands'):]
  start = section.index('```sh\n') + 6
  block = section[start:section.index('\n```', start)]
  commands = [line.split('#')[0].strip() for line in block.split('\n')]
  assert commands == ['make pipeline', 'make test']
  with open(os.path.join(REPO, 'Makefile'), encoding='utf-8') as f:
    targets = re.findall(r'^([\w-]+):', f.read(), flags=re.M)
  assert {c.split()[1] for c in commands} <= set(targets)
  with open(os.path.join(REPO, '.ci', 'run'), encoding='utf-8') as f:
    ci = [l.strip() for l in f if l.strip() and not l.startswith(('#', 'set',
                                                                   'cd'))]
  assert ci[-1] in commands


def _architecture_bullets():
  """{subpackage: its bullet's text} of the architecture page's list."""
  with open(os.path.join(docs_pages.DOCS, 'architecture', 'index.md'),
            encoding='utf-8') as f:
    page = f.read()
  found = {}
  for match in re.finditer(r'^- \*\*`(\w+)/`\*\*(.*?)(?=^- |^#|\Z)', page,
                           flags=re.M | re.S):
    found[match.group(1)] = match.group(2)
  return found


def test_code_map_names_every_module():
  """The architecture page's bullet of each subpackage names every module
  in it (handlers/ included), so the map cannot fall behind the code."""
  package = os.path.join(REPO, 'generic_trainer')
  bullets = _architecture_bullets()
  subpackages = sorted(n for n in os.listdir(package) if os.path.isfile(
      os.path.join(package, n, '__init__.py')))
  assert sorted(bullets) == subpackages
  missing = []
  for name, text in bullets.items():
    named = set(re.findall(r'`([\w/]+)`', text))
    for dirpath, _, files in os.walk(os.path.join(package, name)):
      for f in files:
        stem = f[:-3]
        if f.endswith('.py') and stem != '__init__' and stem not in named:
          missing.append(f'{os.path.relpath(dirpath, package)}/{f}')
  assert not missing, 'modules the code map does not name: ' + ', '.join(
      sorted(missing))


def _resolves(dotted):
  """`generic_trainer.a.b.Name` names a module, or a name its longest
  module prefix defines or re-exports (read as text, nothing imported)."""
  parts = dotted.split('.')
  for n in range(len(parts), 0, -1):
    base = os.path.join(REPO, *parts[:n])
    source = (base + '.py' if os.path.isfile(base + '.py') else
              os.path.join(base, '__init__.py'))
    if os.path.isfile(source):
      if n == len(parts):
        return True
      with open(source, encoding='utf-8') as f:
        return re.search(rf'\b{parts[n]}\b', f.read()) is not None
  return False


def test_code_paths_in_the_docs_exist():
  """Every `generic_trainer/...` path and `generic_trainer.x.y` name the
  docs mention is a file or module of the package."""
  missing = []
  for page in docs_pages.pages():
    with open(page, encoding='utf-8') as f:
      text = f.read()
    for path in set(re.findall(r'\bgeneric_trainer/[\w/]+\.py\b', text)):
      if not os.path.isfile(os.path.join(REPO, path)):
        missing.append(f'{docs_pages.rel(page)}: {path}')
    for dotted in set(re.findall(r'\bgeneric_trainer(?:\.\w+)+', text)):
      if not _resolves(dotted):
        missing.append(f'{docs_pages.rel(page)}: {dotted}')
  assert not missing, '\n'.join(missing)


_ROOMS = ['sequence', 'plan', 'cluster environment', 'launch', 'user code',
          'loop', 'data', 'checks', 'publication']


def test_architecture_page_names_the_room_of_each_stage_in_run_order():
  """The architecture page's table names, in the order a training runs
  through them, the room of each stage (issue 45), each a folder or
  module that exists; its run-order diagram follows the same order."""
  with open(os.path.join(docs_pages.DOCS, 'architecture', 'index.md'),
            encoding='utf-8') as f:
    page = f.read()
  rows = re.findall(r'^\| ([\w ]+) \| (`[^|]+) \|', page, flags=re.M)
  assert [room for room, _ in rows] == _ROOMS
  for room, where in rows:
    for path in re.findall(r'`([\w/.]+\.py|[\w]+/)`', where):
      full = os.path.join(REPO, 'generic_trainer', path)
      assert os.path.exists(full) or os.path.exists(full + '.py'), (room,
                                                                   path)
  flow = page[page.index('## The rooms in the order'):]
  flow = flow[flow.index('```mermaid'):]
  flow = flow[:flow.index('\n```', 4)]
  order = [label.split('<br/>')[0] for label in
           re.findall(r'^\s*\w+\["([^"]*)"\]', flow, flags=re.M)]
  assert order == ['entry point'] + _ROOMS


_INCLUDE = re.compile(r'^\s*--8<--\s', re.M)


def _doc_pages():
  for folder, _, names in os.walk(os.path.join(REPO, 'docs')):
    for name in sorted(names):
      if name.endswith('.md'):
        yield os.path.join(folder, name)


def test_no_page_shows_an_include_line_on_github():
  """A page read on GitHub shows its own Markdown: no `--8<--` include
  line is left in its text, outside code that explains them. A page that
  is only an include of a file of the repository (the benchmarks' details)
  is the site's copy of that file, which GitHub shows in its place."""
  shown = []
  for path in _doc_pages():
    text = open(path).read()
    prose = re.sub(r'```.*?```', '', re.sub(r'`[^`\n]*`', '', text),
                   flags=re.S)
    if _INCLUDE.fullmatch(text.strip() + '\n') or re.fullmatch(
        r'--8<-- "[^"]+"', text.strip()):
      continue
    if _INCLUDE.search(prose) or re.search(r'^--8<-- "', text, re.M):
      shown.append(os.path.relpath(path, REPO))
  assert not shown


def test_copied_sections_match_the_readme_and_the_flags_match_the_parser():
  """The README's pitch and example, copied into the site's pages, are the
  README's; the flags reference is the parser's, group by group."""
  sys.path.insert(0, os.path.join(REPO, 'scripts'))
  try:
    import mkdocs_hooks  # pylint: disable=g-import-not-at-top
  finally:
    sys.path.pop(0)
  readme = open(os.path.join(REPO, 'README.md')).read()

  def section(name):
    return readme.split(f'<!-- --8<-- [start:{name}] -->\n')[1].split(
        f'<!-- --8<-- [end:{name}] -->')[0]

  docs = os.path.join(REPO, 'docs')
  assert section('pitch') in open(os.path.join(docs, 'index.md')).read()
  assert section('example') in open(
      os.path.join(docs, 'getting-started', 'index.md')).read()
  flags = open(os.path.join(docs, 'reference', 'command-flags.md')).read()
  assert mkdocs_hooks.generated_region(flags) == mkdocs_hooks.flags_table()
  spec = open(os.path.join(REPO, 'module_files', 'penguin_spec.py')).read()
  assert spec in open(os.path.join(docs, 'guides', 'train-spec.md')).read()


def _command_sample():
  """scripts/command_sample.py, imported."""
  sys.path.insert(0, os.path.join(REPO, 'scripts'))
  try:
    import command_sample  # pylint: disable=g-import-not-at-top
  finally:
    sys.path.pop(0)
  return command_sample


@pytest.mark.slow
def test_the_command_pages_sample_output_is_what_the_command_prints(
    tmp_path):
  """docs/guides/command.md's sample output is the page's command's, line
  for line (numbers aside): a line the command adds or changes fails here.
  `.venv/bin/python scripts/command_sample.py --write` regenerates it."""
  sample = _command_sample()
  with open(sample.PAGE) as f:
    page = sample.comparable(sample.region(f.read()))
  printed = sample.comparable(sample.run(str(tmp_path)))
  assert page == printed, (
      'docs/guides/command.md shows another output than the command prints; '
      'regenerate it: .venv/bin/python scripts/command_sample.py --write')


def test_the_command_sample_compares_lines_numbers_aside():
  """Two runs differ in times and metrics only: equal once compared; a
  line more is not."""
  sample = _command_sample()
  one = 'first training step after 17.22 s\n  eval: loss=0.02 acc=1\n'
  two = 'first training step after 9.5 s\n  eval: loss=0.3 acc=0.9907\n'
  assert sample.comparable(one) == sample.comparable(two)
  assert sample.comparable(one) != sample.comparable(two + 'epoch 2\n')
  assert sample.region(
      f'x\n{sample.MARKER}\n```text\nline\n```\n{sample.END}\n') == (
          'line\n')


def test_the_guides_index_lists_every_guide_in_the_nav():
  """Every guide of mkdocs.yml's nav has its row in docs/guides/index.md."""
  nav = re.findall(r'guides/([\w-]+\.md)',
                   open(os.path.join(REPO, 'mkdocs.yml')).read())
  index = open(os.path.join(REPO, 'docs', 'guides', 'index.md')).read()
  assert [n for n in nav if n != 'index.md' and f']({n})' not in index] == []


def test_documented_errors_import_from_the_package():
  """Every error class docs/errors.md names imports from generic_trainer."""
  import generic_trainer  # pylint: disable=g-import-not-at-top
  named = set(re.findall(r'`(\w+Error)`', open(
      os.path.join(REPO, 'docs', 'errors.md')).read()))
  from generic_trainer import errors  # pylint: disable=g-import-not-at-top
  ours = {n for n in named if hasattr(errors, n)}
  assert {'ServingCheckError', 'PreemptedError'} <= ours
  assert [n for n in sorted(ours) if not hasattr(generic_trainer, n)] == []


def test_install_lists_every_extra_and_the_component_names_a_trainspec():
  """install.md names every extra of pyproject.toml; the component's
  module_file argument says it may hold a TrainSpec."""
  pyproject = open(os.path.join(REPO, 'pyproject.toml')).read()
  extras = re.findall(r'^(\w+) = \[', pyproject.split(
      '[project.optional-dependencies]')[1].split('\n[')[0], re.M)
  install = open(os.path.join(REPO, 'docs', 'getting-started',
                              'install.md')).read()
  assert [e for e in extras if f'`[{e}]`' not in install] == []
  component = open(os.path.join(REPO, 'generic_trainer', 'component',
                                'component.py')).read()
  doc = component.split('      module_file: Path')[1].split('      module_path:')[0]
  assert 'TrainSpec' in doc


def test_user_pages_carry_no_test_counts_or_benchmark_medians():
  """Pages for users say what to do; counts of tests and medians of runs
  go stale and belong to the benchmarks and the architecture pages."""
  found = []
  for path in _doc_pages():
    rel = os.path.relpath(path, REPO)
    if rel.startswith(('docs/benchmarks', 'docs/architecture')):
      continue
    for n, line in enumerate(open(path), 1):
      if re.search(r'\b\d+ tests\b|\bmedians?\b', line):
        found.append(f'{rel}:{n}')
  assert found == []
