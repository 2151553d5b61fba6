"""``read_tf_checkpoint`` and friends under their import path; the reader is ``bertkit.checkpoint_files.tf_files``."""

from bertkit.checkpoint_files.tf_files import checkpoint_index, checkpoint_prefix, read_tf_checkpoint

__all__ = ["checkpoint_index", "checkpoint_prefix", "read_tf_checkpoint"]
