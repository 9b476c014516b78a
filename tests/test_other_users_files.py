"""Another user's files on the same machine, kept off by our own rule: a
sweep of scratch folders, the cache folder and its entries, each attacked
as another user would (issue 49, scope 5); and a new user's wrong TMPDIR,
named before any scratch folder is made.

The attacks run as root (tests/needs-root.txt), which may remove
anything, even in a sticky folder another user owns files in: what keeps a sweep or an eviction off
another user's files is our own rule (`trust`), not the kernel's. The
other user is uid 65534 (`nobody`), whose files and links are made by a
real process of that user (`setpriv`), in a shared folder with the sticky
bit, as /tmp is. No training runs: each attack meets the function that
decides (`scratch`, `kept.folder`, `kept.entry`) as a training calls it.
"""

import os
import pathlib

import pytest

from message_parts import assert_four_parts
from other_user import NOBODY, as_nobody, reachable_folder
from generic_trainer.data.kept import entry as kept_entry
from generic_trainer.data.kept import folder as kept_folder
from generic_trainer.errors import InvalidArgumentError, UnsafeFolderError
from generic_trainer.system import scratch

_CACHE = 'The parsed rows cache folder'


@pytest.fixture
def shared():
  """A folder every user may add names to, with the sticky bit (mode
  1777, as /tmp), where uid 65534 can reach it (pytest's base folder is
  0700)."""
  with reachable_folder('shared', 0o1777) as path:
    yield path


def _victim(root: pathlib.Path) -> pathlib.Path:
  """A folder of root's, with a file in it, that an attack aims at."""
  victim = root / 'victim'
  victim.mkdir(mode=0o700)
  (victim / 'thesis.tex').write_text('years of work')
  return victim


def test_another_users_folders_of_our_name_are_never_swept(shared,
                                                           tmp_path):
  """In a shared TMPDIR, another user makes folders in our scratch name
  format: one with an unlocked lock file, a day old (what a killed run of
  ours leaves); a link of our name to a folder of root's. A sweep as root
  (which the sticky bit does not stop) removes neither, nor what the link
  points to; a stale folder of our own beside them is removed, so the
  sweep did run."""
  theirs = shared / f'{scratch.PREFIX}cache-1-theirs00'
  link = shared / f'{scratch.PREFIX}cache-2-link0000'
  victim = _victim(tmp_path)
  as_nobody('sh', '-c', f'mkdir -m 755 {theirs} && '
             f'echo rows > {theirs}/theirs.txt && '
             f': > {theirs}/{scratch.LOCK_FILE} && '
             f'touch -d "2 days ago" {theirs} && ln -s {victim} {link}')
  ours = shared / f'{scratch.PREFIX}cache-3-ours0000'
  ours.mkdir(mode=0o700)
  (ours / scratch.LOCK_FILE).write_text('')

  scratch.remove_stale(str(shared))

  assert (theirs / 'theirs.txt').read_text() == 'rows\n'
  assert os.path.islink(link)
  assert (victim / 'thesis.tex').read_text() == 'years of work'
  assert not ours.exists()


def test_another_users_folder_with_a_forged_marker_is_refused_as_the_cache(
    shared):
  """Another user makes a folder that looks like a cache of ours (our
  CACHEDIR.TAG, word for word, and a folder in our entry format) and a
  user is told to use it (`--parsed-rows-cache /shared/rows`): refused,
  naming its owner, before anything there is read or removed."""
  rows = shared / 'rows'
  entry = rows / ('a' * 40)
  as_nobody('sh', '-c', f'mkdir -m 755 {rows} {entry} && '
             f'echo planted > {entry}/blocks.bin && '
             f'printf %s "$0" > {rows}/{kept_folder.MARKER}',
             kept_folder.MARKER_TEXT)

  with pytest.raises(UnsafeFolderError) as info:
    kept_folder.open_marked(str(rows), _CACHE)

  message = str(info.value)
  assert 'it is owned by nobody (uid 65534), not by root' in message
  assert_four_parts(message)
  assert (entry / 'blocks.bin').read_text() == 'planted\n'
  assert set(os.listdir(rows)) == {entry.name, kept_folder.MARKER}


def test_a_link_another_user_puts_in_place_of_the_cache_is_refused(
    shared, tmp_path):
  """The cache folder is named in a shared sticky folder; before the run,
  another user puts a link there to a cache folder of root's (marked,
  holding an entry), so that this run would evict that one. Refused as a
  link another user made; the folder it points to keeps all it holds."""
  victim = tmp_path / 'rows'
  os.close(kept_folder.open_marked(str(victim), _CACHE))
  entry = victim / ('b' * 40)
  entry.mkdir(mode=0o700)
  (entry / 'blocks.bin').write_text('kept rows')
  link = shared / 'rows'
  as_nobody('ln', '-s', str(victim), str(link))

  with pytest.raises(UnsafeFolderError) as info:
    kept_folder.open_marked(str(link), _CACHE)

  message = str(info.value)
  assert f'is a link to {str(victim)!r} made by nobody (uid 65534)' in message
  assert_four_parts(message)
  assert (entry / 'blocks.bin').read_text() == 'kept rows'
  assert (victim / kept_folder.MARKER).read_text() == kept_folder.MARKER_TEXT


def test_an_entry_another_user_planted_in_our_cache_is_not_read(tmp_path):
  """A cache folder of ours that was once writable by others (made by an
  older version, or chmod-ed by hand) holds an entry-named folder of
  another user's: a training never takes its rows for its data (an
  entry is read only when its folder, manifest and blocks are this
  user's alone), whatever its manifest says."""
  rows = tmp_path / 'rows'
  os.close(kept_folder.open_marked(str(rows), _CACHE))
  planted = rows / ('c' * 40)
  planted.mkdir()
  (planted / kept_entry.MANIFEST).write_text('{}')
  (planted / kept_entry.BLOCKS).write_text('poisoned rows')
  for path in (planted, planted / kept_entry.MANIFEST,
               planted / kept_entry.BLOCKS):
    os.chown(path, NOBODY, NOBODY)

  found, why = kept_entry.check_entry(str(planted), None)

  assert found is None
  assert why.startswith('its folder is '), why
  assert 'uid 65534' in why, why


@pytest.mark.parametrize('given, what', [
    ('relative/tmp', 'does not exist'),
    ('a-file', 'is not a folder'),
])
def test_a_new_users_wrong_tmpdir_is_named_before_any_scratch(
    tmp_path, monkeypatch, given, what):
  """A new user's TMPDIR that names no folder (a relative path that is not
  there, a file) is refused with the fix, never silently replaced by /tmp
  as Python's `tempfile` would."""
  monkeypatch.chdir(tmp_path)
  (tmp_path / 'a-file').write_text('')
  monkeypatch.setenv('TMPDIR', given)
  monkeypatch.setattr(scratch.tempfile, 'tempdir', None)

  with pytest.raises(InvalidArgumentError) as info:
    with scratch.folder('cache'):
      pass

  message = str(info.value)
  relative = f' (a relative path: {tmp_path / given} from the folder this'
  assert message.startswith(f'TMPDIR {what}{relative}'), message
  assert f'Received: TMPDIR={given!r}' in message
  assert_four_parts(message)
