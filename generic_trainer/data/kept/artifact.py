"""The artifact type GenericTrainer adds: `ParsedRows`.

The parsed rows of the files an execution trained on, kept for the next
execution (`data.kept.cache`): one entry per TFRecord file, and
`decisions.json`. Like Transform's `TransformCache` (`analyzer_cache` in,
`updated_analyzer_cache` out), it flows from one execution to the next
through a resolver of the latest one, and its custom properties say what
each execution reused (`hits`, `misses`, `decisions`).
"""

from tfx.types import artifact


class ParsedRows(artifact.Artifact):
  """Parsed rows of the spans a GenericTrainer execution read, kept for
  the next one (docs/guides/parsed-rows-cache.md)."""
  TYPE_NAME = 'ParsedRows'
