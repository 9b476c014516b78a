"""The first hour of a team (issue 42): what a new user met, one test each.

The flags (typos, abbreviations, folders, a glob the shell expanded, the
help), the CSV conversion a retrain reuses, the command's output off a
terminal, the mistakes named before or instead of a traceback, and the
docs as GitHub shows them. The team's environment, with the wheel installed
into it, is tests/test_installed_wheel.py (slow).
"""

import ast
import gzip
import io
import os
import re
import shutil
import sys

import pytest

from conftest import REPO, TESTDATA
from message_parts import assert_four_parts

SPEC_MODULE = os.path.join(REPO, 'module_files', 'penguin_spec.py')


def _main(*argv):
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  return cli.main(list(argv))


def _error_line(err: str) -> str:
  return [l for l in err.splitlines() if l.startswith('generic-trainer: ')][0]


def _csv(path, text):
  path.write_text(text)
  return str(path)


# Flags.

@pytest.mark.parametrize('typed, meant', [('--trian-data', '--train-data'),
                                          ('--output_dir', '--output-dir'),
                                          ('--step', '--steps')])
def test_an_unknown_flag_is_named_with_the_nearest_known_one(
    tmp_path, capsys, typed, meant):
  """A misspelt flag (or an abbreviation, which is not taken) is named with
  the flag meant, not answered with "required: --train-data"."""
  argv = {'--module-file': SPEC_MODULE, '--train-data': 'x.csv',
          '--output-dir': str(tmp_path / 'out'), '--steps': '6'}
  argv[typed] = argv.pop(meant)
  assert _main(*[w for kv in argv.items() for w in kv]) == 2
  message = _error_line(capsys.readouterr().err)
  assert message.startswith(f'generic-trainer: error: {typed} is not a flag '
                            f'of generic-trainer; did you mean {meant}?')
  assert_four_parts(message)


def test_a_glob_the_shell_expanded_says_to_quote_it(tmp_path, capsys):
  """`--train-data data/*.csv` unquoted reaches the command as several
  paths: the error says so, and how to quote it."""
  files = [_csv(tmp_path / f'{n}.csv', 'a,b\n1,2\n') for n in 'abc']
  assert _main('--module-file', SPEC_MODULE, '--train-data', *files,
               '--output-dir', str(tmp_path / 'out')) == 2
  message = _error_line(capsys.readouterr().err)
  assert 'The shell expands an unquoted glob' in message
  assert "Quote the glob (--train-data 'data/*.csv')" in message
  assert_four_parts(message)


def test_a_folder_as_data_means_its_csv_files(tmp_path, capsys):
  """A folder as --train-data is its CSV files (else its TFRecord files),
  and the command says which it took."""
  from generic_trainer.command import cli_args  # pylint: disable=g-import-not-at-top
  data = tmp_path / 'data'
  data.mkdir()
  files = [_csv(data / f'{n}.csv', 'a,b\n1,2\n') for n in 'ab']
  (data / 'notes.txt').write_text('not data')
  request = cli_args.parse(['--module-file', SPEC_MODULE, '--train-data',
                            str(data), '--output-dir', str(tmp_path / 'out')],
                           started=0.0)
  assert request.train_data == files
  assert (f'--train-data {data}: taking its 2 CSV file(s): a.csv, b.csv'
          in capsys.readouterr().err)


def test_help_is_grouped_with_an_example_and_every_exit_status(capsys):
  """--help: the flags by group, one example, every exit status, and where
  the cache lives and how big it may grow."""
  with pytest.raises(SystemExit):
    _main('--help')
  text = capsys.readouterr().out
  titles = re.findall(r'^(\w+):$', text, re.M)
  assert titles[1:6] == ['data', 'training', 'outputs', 'workers', 'cache']
  assert re.search(r"^example:\n  generic-trainer --module-file .*\n", text,
                   re.M)
  for status in ('0', '1', '2', '130', '143'):
    assert re.search(rf'^  {status} +\w', text, re.M), status
  cache = text.split('\ncache:\n')[1]
  assert '$XDG_CACHE_HOME' in cache and 'most gigabytes' in cache


# The CSV conversion, reused by a retrain.

def test_the_same_csv_converts_to_the_same_file_run_after_run(tmp_path):
  """Converted twice (the folder cleared between, as a run does), the same
  CSV gives the same data.gz, byte for byte and with the same time, and so
  do the held-out split's files: a retrain finds its kept rows."""
  from generic_trainer.command import holdout  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import local_files  # pylint: disable=g-import-not-at-top
  rows = ''.join(f'{i},{i * 0.5},{"xyz"[i % 3]},{i % 2}\n' for i in range(60))
  source = _csv(tmp_path / 'rows.csv', 'a,b,c,label\n' + rows)
  seen = []
  for _ in range(2):
    data = tmp_path / 'data'
    shutil.rmtree(data, ignore_errors=True)
    (whole,) = local_files.to_split(source, str(data / 'whole'))
    parts = holdout.split([whole], str(data / 'Split-train'),
                          str(data / 'Split-eval'))
    seen.append([(open(p, 'rb').read(), os.stat(p).st_mtime_ns)
                 for p in [whole] + parts.train_files + parts.eval_files])
  assert seen[0] == seen[1]
  assert gzip.decompress(seen[0][0][0])  # A gzip file, read whole.


# Output.

def test_off_a_terminal_the_export_dump_and_ansi_codes_are_dropped(
    monkeypatch):
  """When stdout is a file or a pipe, Keras's "Saved artifact at ..." dump
  and ANSI codes do not reach it; other lines do."""
  from generic_trainer.system import console  # pylint: disable=g-import-not-at-top
  out = io.StringIO()
  monkeypatch.setattr(sys, 'stdout', out)
  with console.command_lines(io.StringIO()):
    sys.stdout.write("Saved artifact at '/tmp/m'. The following endpoints "
                     "are available:\n\n* Endpoint 'serve'\n  args_0: ...\n")
    print('\x1b[1m4/4\x1b[0m \x1b[32m━━━━\x1b[0m loss: 0.5')
  assert out.getvalue() == '4/4 ━━━━ loss: 0.5\n'


def test_the_summary_names_only_what_exists_and_no_source_file(
    tmp_path, capsys):
  """The last lines name the folders that exist, and a run_fn without a
  record is pointed to the docs, not to the package's source."""
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  from generic_trainer.command import run  # pylint: disable=g-import-not-at-top
  from generic_trainer.command.layout import Layout  # pylint: disable=g-import-not-at-top
  layout = Layout(str(tmp_path))
  os.makedirs(layout.model)
  request = type('R', (), {'module_file': 'm.py'})()
  cli._print_outcome(request, run.Outcome('`run_fn`', None, {}, layout, None))  # pylint: disable=protected-access
  out = capsys.readouterr().out
  assert f'model:  {layout.model}' in out
  assert 'run:' not in out and 'data:' not in out and 'schema:' not in out
  assert 'generic_trainer/' not in out
  assert 'docs/guides/run-fn-modules.md' in out
  guide = open(os.path.join(REPO, 'docs', 'guides', 'run-fn-modules.md')).read()
  assert '## The training record' in guide


# Mistakes, round four.

def test_blanks_in_a_run_fns_csv_data_are_named_before_its_code_runs(
    tmp_path, capsys):
  """A run_fn trained on CSV data with blanks: every column with blanks,
  how many cells, and what to do, before the module's code runs (not an
  AttributeError about VarLenFeature from inside it)."""
  module = tmp_path / 'module.py'
  module.write_text('def run_fn(fn_args):\n  raise AssertionError("ran")\n')
  rows = ['a,b,c,label'] + [f'{i},{i},{i},{i % 2}' for i in range(30)]
  rows[3], rows[5], rows[7] = '2,,2,0', '4,,,0', '6,6,NA,0'
  data = _csv(tmp_path / 'rows.csv', '\n'.join(rows) + '\n')
  assert _main('--module-file', str(module), '--train-data', data,
               '--output-dir', str(tmp_path / 'out')) == 1
  message = _error_line(capsys.readouterr().err)
  assert message.startswith(
      f'generic-trainer: InputArtifactError: {data}: 2 columns have missing '
      "values (4 cells: 'b' 2 (line 4, 6); 'c' 2 (line 6, 8))")
  assert 'VarLenFeature' in message and '--schema' in message
  assert 'a default' in message
  assert_four_parts(message)


def test_every_column_with_missing_values_is_named_at_once(tmp_path):
  """A TrainSpec's required columns: all those with blanks in one message,
  not the first alone."""
  from generic_trainer.data import csv_data  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InputArtifactError  # pylint: disable=g-import-not-at-top
  table = csv_data.read(_csv(tmp_path / 'x.csv', 'a,b,c\n1,,3\n,2,\n4,5,6\n'))
  with pytest.raises(InputArtifactError) as e:
    csv_data.check_required([table], {'*': 'the model reads it'})
  message = str(e.value)
  assert "3 columns have missing values (3 cells: 'a' 1 (line 3); 'b' 1 " \
         "(line 2); 'c' 1 (line 3))" in message
  assert_four_parts(message)


def test_the_migration_reader_never_crashes_on_a_module():
  """TFX's Estimator-era template (a run_fn calling train_and_evaluate,
  columns from another module) gets its advice; so does every function of
  it alone, each read without the rest: the reader says what it could
  read, it never raises."""
  from generic_trainer.migration import advice  # pylint: disable=g-import-not-at-top
  path = os.path.join(TESTDATA, 'tfx_template_estimator_model.py')
  source = open(path).read()
  text = advice.advice(source, [(6, 'from tensorflow import estimator')])
  assert 'DNNLinearCombinedClassifierSpec' in text
  assert 'dnn_hidden_units = [100, 70, 48, 34]' in text
  tree = ast.parse(source)
  for node in tree.body:  # Each part alone: names it cannot follow.
    advice.advice(ast.get_source_segment(source, node) or '')
  odd = ('from tensorflow import estimator as e\nimport m\n'
         'def f():\n  for a, b in m.pairs():\n    x = a\n'
         '  (c, d) = m.two()\n  while m.more():\n    pass\n'
         '  return e.DNNClassifier(hidden_units=[x, c], '
         'feature_columns=[y for y in 3])\n')
  assert 'DNNClassifierSpec' in advice.advice(odd)


def test_a_misspelt_loss_name_is_named_before_training():
  """`build_loss()` returning a name Keras does not know is refused with
  the name meant, not met at the first step as a shape mismatch."""
  from generic_trainer.errors import SpecError  # pylint: disable=g-import-not-at-top
  from generic_trainer.trainspec import member_checks  # pylint: disable=g-import-not-at-top

  class PenguinSpec:
    pass

  with pytest.raises(SpecError) as e:
    member_checks.loss(PenguinSpec(), 'sparse_categorical_crossentrpy')
  assert str(e.value).startswith(
      "PenguinSpec.build_loss() returned 'sparse_categorical_crossentrpy', "
      "which Keras does not know as a loss; did you mean "
      "'sparse_categorical_crossentropy'?")
  assert_four_parts(str(e.value))
  assert member_checks.loss(PenguinSpec(), {'y': 'mse'}) == {'y': 'mse'}


def test_keras2_saving_under_keras3_says_what_replaces_it():
  """`model.save(dir, save_format='tf')` under Keras 3: Keras's refusal
  with what was expected and what replaces it: a signature of serialized
  tf.Example, which Evaluator needs, not model.export's raw tensors
  alone."""
  from generic_trainer.errors import RunFnError  # pylint: disable=g-import-not-at-top
  from generic_trainer.usercode import guard  # pylint: disable=g-import-not-at-top
  keras_says = ('The `save_format` argument is deprecated in Keras 3. Please '
                'remove this argument and pass a file path with either '
                '`.keras` or `.h5` extension.Received: save_format=tf')
  with pytest.raises(RunFnError) as e:
    with guard.user_code('run_fn', 'm.py'):
      raise ValueError(keras_says)
  message = str(e.value)
  assert ("Keras 3's model.export(dir) alone writes a signature of raw "
          'tensors, which TF Serving can call but Evaluator cannot') in message
  assert ('a tf.function taking tf.TensorSpec([None], tf.string, '
          '"examples")') in message
  assert "keras_version='tf_keras'" in message
  assert_four_parts(message.split('\nIts traceback')[0])


def test_an_empty_csv_says_what_its_first_line_must_hold(tmp_path):
  """An empty CSV file: what the first line must be (the column names,
  separated by the delimiter), what it got, and what to do."""
  from generic_trainer.data import csv_data  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InputArtifactError  # pylint: disable=g-import-not-at-top
  for text in ('', '\n\n', ' , \n1,2\n'):
    path = _csv(tmp_path / 'e.csv', text)
    with pytest.raises(InputArtifactError) as e:
      csv_data.read(path)
    message = str(e.value)
    assert 'Expected the first line to name the columns' in message, message
    assert_four_parts(message)


# The docs, as GitHub shows them.

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


def test_the_cache_lines_read_as_information(tmp_path, caplog):
  """A first run's kept-rows line says the rows are parsed this run, with
  none kept yet, not "miss ... (no entry)", which reads like an error."""
  from generic_trainer.data.kept import cache  # pylint: disable=g-import-not-at-top
  from generic_trainer.system import progress  # pylint: disable=g-import-not-at-top
  spans = cache.SpanCache(str(tmp_path))
  spans.decisions['/out/data/Split-train/data.gz'] = {
      'decision': 'miss', 'why': 'no entry', 'key': 'k'}
  with caplog.at_level('INFO', logger=progress.log().name):
    spans.log_decisions()
  (line,) = [r.getMessage() for r in caplog.records]
  assert 'miss' not in line and 'no entry' not in line
  assert line.startswith('parsed rows: parsing ') and (
      'data.gz: none kept yet' in line)
