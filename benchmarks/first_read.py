"""Where the CPU of a first read goes, per 1M rows of the narrow table.

    python -m benchmarks.first_read --rows 200000

On one gzip TFRecord data set (`synthetic_data`, 12 float features and an
int label), each part alone, in this process, one thread where it can be
(CPU seconds from `time.process_time`, scaled to 1M rows):

- inflate: zlib on the gzip files (Python's zlib, the same C library TF's
  reader uses), the inflated bytes kept for the next part;
- framing and CRC: TF's record reader over the inflated (uncompressed)
  files: each record's length and data, and their masked CRC32C;
- gzip read: TF's reader over the gzip files (inflate + framing + CRC), as
  the input pipeline reads them;
- parse_example: `tf.io.parse_example` of blocks of `PARSE_ROWS` records
  already in memory, with the schema's config;
- read back: the kept entries of the same rows checked and their blocks
  read as training reads them (`input_pipeline.parsed_blocks` with them,
  iterated inside TensorFlow); and the cost of more files of them (all
  4 shards' against 2's, per 1M rows, the least of 5 measures each),
  without the fixed cost of building and starting a dataset.

Tried variants are the `--try` options; benchmarks/README.md has the
numbers.
"""

import argparse
import json
import os
import tempfile
import time
import zlib

from benchmarks import synthetic_data


def _cpu(fn):
  started = time.process_time()
  out = fn()
  return time.process_time() - started, out


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--rows', type=int, default=200_000)
  parser.add_argument('--data-dir', default=os.path.join(
      os.path.expanduser('~'), '.cache', 'tfx-generic-trainer', 'benchmark',
      'first-read'))
  parser.add_argument('--out')
  args = parser.parse_args(argv)
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import input_pipeline, schema_file  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.data.kept import cache as kept_cache  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.data.kept import entry as kept_entry
  from generic_trainer.data.kept import key as kept_key
  tf.config.threading.set_inter_op_parallelism_threads(1)
  tf.config.threading.set_intra_op_parallelism_threads(1)
  root = os.path.join(args.data_dir, f'rows{args.rows}')
  data = synthetic_data.write(root, args.rows, 1, shards=4)
  files = sorted(os.path.join(data['train'], n)
                 for n in os.listdir(data['train']))
  scale = 1e6 / args.rows
  result = {'rows': args.rows, 'gzip_bytes': sum(map(os.path.getsize,
                                                     files))}

  def inflate():
    out = []
    for path in files:
      with open(path, 'rb') as f:
        out.append(zlib.decompress(f.read(), wbits=zlib.MAX_WBITS | 16))
    return out

  result['inflate_s'], inflated = _cpu(inflate)
  result['inflated_bytes'] = sum(map(len, inflated))
  with tempfile.TemporaryDirectory() as tmp:
    plain = []
    for i, content in enumerate(inflated):
      path = os.path.join(tmp, f'{i}.tfrecord')
      with open(path, 'wb') as f:
        f.write(content)
      plain.append(path)
    del inflated

    def read(paths, compression, buffer_size=1 << 20):
      batches = []
      for path in paths:
        batches += list(tf.data.TFRecordDataset(
            path, compression, buffer_size=buffer_size).batch(
                input_pipeline.PARSE_ROWS))
      return batches

    read(plain[:1], '')  # Traced once, not counted.
    result['framing_crc_s'], _ = _cpu(lambda: read(plain, ''))
    result['gzip_read_s'], blocks = _cpu(lambda: read(files, 'GZIP'))
    for size in (256 << 10, 8 << 20):
      result[f'try_gzip_read_buffer_{size >> 10}k_s'], _ = _cpu(
          lambda s=size: read(files, 'GZIP', s))
  config, names = input_pipeline.parser_config(
      schema_file.read(data['schema']))
  parse = tf.function(lambda s: tf.io.parse_example(s, config))
  parse(blocks[0])
  result['parse_example_s'], parsed = _cpu(lambda: [parse(b)
                                                    for b in blocks])
  merged = tf.concat(blocks, 0)
  for rows in (1024, 16384):
    pieces = [merged[i:i + rows] for i in range(0, int(merged.shape[0]), rows)]
    parse(pieces[0])
    result[f'try_parse_example_{rows}_rows_s'], _ = _cpu(
        lambda p=pieces: [parse(b) for b in p])
  del parsed
  # A kept entry of the same rows, written then checked and read back.
  with tempfile.TemporaryDirectory() as tmp:
    label = synthetic_data.LABEL_KEY
    shared = {**kept_key.parser_fields(config, names, label,
                                       input_pipeline.PARSE_ROWS),
              **kept_key.environment_fields(), 'transform': None}
    with kept_cache.SpanCache(tmp) as store:
      for _ in input_pipeline.block_dataset(
          [data['train'] + '/*'], config, names, label, 256, 1, False,
          cache=False, kept=(store, shared)):
        pass
    # Each entry is a folder; the store's own files (its records, its
    # CACHEDIR.TAG marker) are not entries.
    entries = [os.path.join(tmp, n) for n in os.listdir(tmp)
               if os.path.isdir(os.path.join(tmp, n))]
    result['kept_bytes'] = sum(os.path.getsize(
        os.path.join(e, kept_entry.BLOCKS)) for e in entries)

    def read_back(patterns):
      # As training reads them: the entries looked up (each checked
      # whole) and their blocks iterated in TensorFlow, without Python.
      with kept_cache.SpanCache(tmp, record=False) as store:
        blocks = input_pipeline.parsed_blocks(
            patterns, config, names, label, True, kept=(store, shared))
        blocks.reduce(0, lambda count, *unused: count + 1).numpy()

    half = files[:len(files) // 2]
    read_back(half)  # Traced once, not counted.
    read_back(files)
    # The least of 5: two more files of 50k rows are ~0.005 s of CPU, as
    # small as what one measure moves by.
    half_s = min(_cpu(lambda: read_back(half))[0] for _ in range(5))
    result['read_back_s'] = min(_cpu(lambda: read_back(files))[0]
                                for _ in range(5))
    # More files of kept rows: the cost per row, without the dataset's
    # fixed cost (~0.05 s to build and start it, whatever its size); half
    # the files and all of them read alike (two at a time).
    more_rows = args.rows - args.rows * len(half) // len(files)
    result['read_back_one_more_file_s_per_1m_rows'] = round(
        (result['read_back_s'] - half_s) * 1e6 / more_rows, 3)
  per_million = {k[:-2] + '_per_1m_rows_s': round(v * scale, 3)
                 for k, v in result.items() if k.endswith('_s')}
  result.update(per_million)
  result['kept_over_gzip_bytes'] = result['kept_bytes'] / result['gzip_bytes']
  print(json.dumps(result, indent=1))
  if args.out:
    with open(args.out, 'w') as f:
      json.dump(result, f, indent=1)


if __name__ == '__main__':
  main()
