"""Publication: where an export is staged, and the one commit point.

`staged_export` (`StagedExport`): a clean staging folder inside the Model
artifact, a rejected export moved aside for inspection, and the atomic
move into the place a Pusher reads.

May import: the base. Never `training` or the entry points.
"""
