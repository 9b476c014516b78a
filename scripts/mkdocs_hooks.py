"""MkDocs hooks (mkdocs.yml `hooks:`): pages generated from the code.

`<!-- generated: command-flags -->` in a page becomes the table of the
`generic-trainer` command's flags, read from its argparse parser
(`generic_trainer.command.cli_args`), so the reference cannot drift from the
command. Importing the parser loads no TensorFlow.
"""

import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARKER = '<!-- generated: command-flags -->'


def _cell(text: str) -> str:
  return ' '.join(str(text).split()).replace('|', '\\|')


def flags_table() -> str:
  """The parser's options as a Markdown table: flag, value, help."""
  if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
  from generic_trainer.command import cli_args  # pylint: disable=g-import-not-at-top
  parser = cli_args._parser()  # pylint: disable=protected-access
  rows = ['| flag | value | required | what it is |', '|---|---|---|---|']
  for action in parser._actions:  # pylint: disable=protected-access
    if not action.option_strings:
      continue
    flags = ', '.join(f'`{f}`' for f in action.option_strings)
    value = f'`{action.metavar}`' if action.metavar else ''
    if action.nargs == 0:
      value = ''
    required = 'yes' if action.required else ''
    help_text = _cell(action.help or '')
    if help_text and '%(' in help_text:
      help_text = help_text % {'prog': parser.prog, 'default': action.default}
    rows.append(f'| {flags} | {value} | {required} | {help_text} |')
  epilog = _cell(parser.epilog or '')
  return '\n'.join(rows) + ('\n\n' + epilog if epilog else '') + '\n'


def on_page_markdown(markdown, page, config, files):  # pylint: disable=unused-argument
  if MARKER in markdown:
    return markdown.replace(MARKER, flags_table())
  return markdown
