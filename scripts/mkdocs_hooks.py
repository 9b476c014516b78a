"""MkDocs hooks (mkdocs.yml `hooks:`): pages generated from the code.

Between `<!-- generated: command-flags -->` and its end marker a page holds
the tables of the `generic-trainer` command's flags, read from its argparse
parser (`generic_trainer.command.cli_args`): committed, so that the page
reads whole on GitHub, made fresh when the site is built, and checked equal
to the parser's by tests/test_docs.py, so the reference cannot drift
from the command. Importing the parser loads no TensorFlow.
"""

import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARKER = '<!-- generated: command-flags -->'
END = '<!-- end generated: command-flags -->'


def _cell(text: str) -> str:
  return ' '.join(str(text).split()).replace('|', '\\|')


def flags_table() -> str:
  """The parser's options as Markdown: a table (flag, value, required, what
  it is) per group of `--help`, then its epilog (an example, the exit
  statuses) as text."""
  if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
  from generic_trainer.command import cli_args  # pylint: disable=g-import-not-at-top
  parser = cli_args._parser()  # pylint: disable=protected-access
  out = []
  for group in parser._action_groups:  # pylint: disable=protected-access
    actions = [a for a in group._group_actions if a.option_strings]  # pylint: disable=protected-access
    if not actions:
      continue
    out += [f'**{group.title}**', '',
            '| flag | value | required | what it is |', '|---|---|---|---|']
    for action in actions:
      flags = ', '.join(f'`{f}`' for f in action.option_strings)
      value = (f'`{action.metavar}`'.replace('|', '\\|') if action.metavar
               else '')
      if action.nargs == 0:
        value = ''
      required = 'yes' if action.required else ''
      help_text = _cell(action.help or '')
      if help_text and '%(' in help_text:
        help_text = help_text % {'prog': parser.prog,
                                 'default': action.default}
      out.append(f'| {flags} | {value} | {required} | {help_text} |')
    out.append('')
  if parser.epilog:
    out += ['```text', parser.epilog, '```', '']
  return '\n'.join(out)


def generated_region(markdown: str) -> str:
  """What a page holds between MARKER and END (the table as committed)."""
  return markdown.split(MARKER + '\n', 1)[1].split(END, 1)[0]


def on_page_markdown(markdown, page, config, files):  # pylint: disable=unused-argument
  if MARKER + '\n' in markdown and END in markdown:  # Made fresh for the site.
    return markdown.replace(generated_region(markdown), flags_table())
  return markdown
