"""Names shared across GenericTrainer: its execution-property and input keys
(the rest are TFX's, in `tfx.types.standard_component_specs`), and the
values some of them take.

Constants live here, not in the modules that act on them, so that importing
a name never imports a behaviour.
"""

# TFX's layout of a Model artifact (`tfx.utils.path_constants`): the
# serving SavedModel and the eval one, in folders of these names
# (`system.paths.model_dirs`).
SERVING_MODEL_DIR = 'Format-Serving'
EVAL_MODEL_DIR = 'Format-TFMA'

# Files named by TFX and TensorFlow, each spelled here once: the graph by
# which a folder is a SavedModel (`system.saved_models` parses it), the
# schema SchemaGen writes (`data.schema_file` reads and writes it), and
# the one gzip TFRecord file a split folder of ours holds when we write
# it (`data.local_files`, `command.holdout`).
SAVED_MODEL_FILE = 'saved_model.pb'
SCHEMA_FILE = 'schema.pbtxt'
SPLIT_DATA_FILE = 'data.gz'

# What a training writes in its ModelRun folder (`model_run_dir`, the
# command's run/), each name read by its writer: the fit loop's history,
# checkpoints and TensorBoard summaries; the training record; a rejected
# export; the local workers' logs and summary; a resume's scratch. What a
# killed run's successor may remove there (`command.layout.RUN_NAMES`).
HISTORY_FILE = 'history.json'
CHECKPOINT_DIR = 'checkpoints'
TENSORBOARD_DIR = 'tensorboard'
RESULT_FILE = 'train_result.json'
REJECTED_DIR_NAME = 'rejected_export'
WORKER_LOGS_DIR = 'worker-logs'
WORKERS_SUMMARY_FILE = 'workers.json'
RESUME_SCRATCH_DIR = '.resume-scratch'
MODEL_RUN_FILES = (HISTORY_FILE, RESULT_FILE, WORKERS_SUMMARY_FILE)
MODEL_RUN_FOLDERS = (CHECKPOINT_DIR, TENSORBOARD_DIR, REJECTED_DIR_NAME,
                     WORKER_LOGS_DIR, RESUME_SCRATCH_DIR)

# Where the user code comes from: exactly one of these execution properties.
MODULE_FILE_KEY = 'module_file'
MODULE_PATH_KEY = 'module_path'
RUN_FN_KEY = 'run_fn'
SOURCE_KEYS = (MODULE_FILE_KEY, MODULE_PATH_KEY, RUN_FN_KEY)

# GenericTrainer's additions to TFX's Trainer spec.
STATISTICS_KEY = 'statistics'
KERAS_VERSION_KEY = 'keras_version'
NUM_WORKERS_KEY = 'num_workers'
STRATEGY_KEY = 'strategy'
ALLOW_SIGNATURE_CHANGE_KEY = 'allow_signature_change'
BACKEND_KEY = 'backend'
MAX_RESTARTS_KEY = 'max_restarts'
# JSON of `generic_trainer.kubeflow.pod_settings.PodSettings`.
POD_SETTINGS_KEY = 'pod_settings'
# Parsed rows kept across executions (data.kept.cache): the input resolved
# from an earlier execution, and the output this one writes.
PARSED_ROWS_KEY = 'parsed_rows'
UPDATED_PARSED_ROWS_KEY = 'updated_parsed_rows'
# Custom properties of the output: counts of files hit and missed, and the
# decision per span and file (JSON).
PARSED_ROWS_HITS = 'hits'
PARSED_ROWS_MISSES = 'misses'
PARSED_ROWS_DECISIONS = 'decisions'
# And the most bytes it keeps, when set (the command's --parsed-rows-budget).
PARSED_ROWS_BUDGET = 'budget_bytes'
# The most a parsed-rows store keeps when nothing sets it, in GiB: the
# least-recently used files' rows go first (`data.kept.cache`).
PARSED_ROWS_DEFAULT_BUDGET_GB = 20

# Restarts of a local worker group after a worker died, when unset.
DEFAULT_MAX_RESTARTS = 2

# Values of `keras_version`: what `tf.keras` means for the training.
KERAS3 = 'keras3'
TF_KERAS = 'tf_keras'
KERAS_VERSIONS = (KERAS3, TF_KERAS)

# Values of `backend` (and of TrainSpec.backend): what Keras 3 computes with.
TENSORFLOW_BACKEND = 'tensorflow'
JAX_BACKEND = 'jax'
BACKENDS = (TENSORFLOW_BACKEND, JAX_BACKEND)
# The environment variable Keras 3 reads its backend from, once per process.
KERAS_BACKEND_ENV = 'KERAS_BACKEND'

# Values of `strategy`.
DEFAULT_STRATEGY = 'default'
MIRRORED = 'mirrored'
MULTI_WORKER_MIRRORED = 'multi_worker_mirrored'
STRATEGIES = (DEFAULT_STRATEGY, MIRRORED, MULTI_WORKER_MIRRORED)

# The environment variable a cluster describes itself in.
TF_CONFIG_ENV = 'TF_CONFIG'
# Where a Kubeflow Trainer v2 pod (a JobSet's) learns its place, when no
# TF_CONFIG is set: the TrainingRuntime (`kubeflow.trainjob`) sets the
# first three from the JobSet's pod labels (downward API), Kubernetes sets
# JOB_COMPLETION_INDEX in an Indexed Job's pods, and the TrainJob sets the
# node count. The subdomain and port are optional (JobSet's default
# subdomain is the JobSet's name; the port is TF's usual 2222).
JOBSET_NAME_ENV = 'JOBSET_NAME'
JOBSET_REPLICATED_JOB_ENV = 'REPLICATED_JOB_NAME'
JOBSET_JOB_INDEX_ENV = 'JOB_INDEX'
JOBSET_POD_INDEX_ENV = 'JOB_COMPLETION_INDEX'
JOBSET_NUM_NODES_ENV = 'GENERIC_TRAINER_NUM_NODES'
JOBSET_SUBDOMAIN_ENV = 'JOBSET_SUBDOMAIN'
JOBSET_PORT_ENV = 'GENERIC_TRAINER_PORT'
JOBSET_DEFAULT_PORT = 2222
JOBSET_REQUIRED_ENV = (JOBSET_NAME_ENV, JOBSET_REPLICATED_JOB_ENV,
                       JOBSET_JOB_INDEX_ENV, JOBSET_POD_INDEX_ENV,
                       JOBSET_NUM_NODES_ENV)
# What the operators and our TrainingRuntime set to place a pod in its
# group: `pod_settings` may not set them (launch.cluster_environment reads
# them).
CLUSTER_PLACE_ENV = (TF_CONFIG_ENV,) + JOBSET_REQUIRED_ENV

# SIGTERM (a preemption, a pod deleted): training stops at the next step,
# saves it, and the command exits with 128 + SIGTERM, as a shell reports a
# process that SIGTERM ended (`preemption`).
PREEMPTED_EXIT_CODE = 143
# How long a parent waits for its child or local workers to save after it
# forwarded SIGTERM to them, before it kills them: inside Kubernetes's
# default grace period of 30 s.
PREEMPTION_WAIT_S = 25.0
# The pods' grace period in a rendered TFJob: the time from SIGTERM to
# SIGKILL, which the step's checkpoint and the exit must fit in.
TERMINATION_GRACE_PERIOD_S = 60
# The file through which a local group's chief tells its workers the step
# to stop at after a SIGTERM (`loop.handlers.preemption_stop`).
STOP_FILE_ENV = 'GENERIC_TRAINER_STOP_FILE'
# After a SIGTERM, how long a training may go without reaching a step
# boundary (user code that blocks: a handler waiting on something) before
# it is interrupted and leaves with its last resume checkpoint; the process
# then ends by itself (exit 143) at the latest `PREEMPTION_EXIT_S` after the
# signal: both inside PREEMPTION_WAIT_S, so a parent still sees it end, and
# inside Kubernetes's 30 s (`preemption`). The variable changes the first
# (seconds), for a pod whose grace period is shorter.
PREEMPTION_STEP_WAIT_S = 15.0
PREEMPTION_EXIT_S = 22.0
PREEMPTION_STEP_WAIT_ENV = 'GENERIC_TRAINER_PREEMPTION_STEP_WAIT_S'
# A hung training (every process alive, none progressing) is ended after
# this many seconds without a new training step (or, before the first step,
# without new output from a local worker): `launch.stall_watch`. The
# variable changes it; 0 turns the watch off.
STALL_LIMIT_S = 1800.0
STALL_LIMIT_ENV = 'GENERIC_TRAINER_STALL_S'
# The file a training process writes its step count into (the fit loop's
# `loop.handlers.heartbeat`), which its parent watches for a stall.
HEARTBEAT_FILE_ENV = 'GENERIC_TRAINER_HEARTBEAT_FILE'
# The process id of the process that started a child training process
# (`launch.child_process.start`): the child asks to die with it
# (`child_process.die_with_parent`), and ends at once if it is gone.
PARENT_PID_ENV = 'GENERIC_TRAINER_PARENT_PID'
# Which network local workers use: 'private' (default: a network namespace
# with loopback only, no port reachable from outside and no way out), or
# 'host' (this machine's network, ports reserved and reachable from its
# network: for workers that need the network, e.g. gs:// artifacts).
WORKER_NETWORK_ENV = 'GENERIC_TRAINER_WORKER_NETWORK'
WORKER_NETWORKS = ('private', 'host')
# The folders a process found safe to hold this user's folders (TMPDIR and
# its ancestors: `trust.check_ancestors`), as 'dev:inode' pairs, for its
# children: in the local workers' user namespace root's folders show as
# owned by the overflow uid, which a child cannot tell from another user's.
VERIFIED_FOLDERS_ENV = 'GENERIC_TRAINER_VERIFIED_FOLDERS'

# The output folder whose journal a run notes what it writes in (and the
# folders it writes), for its child processes (`system.journal`): JSON.
JOURNAL_ENV = 'GENERIC_TRAINER_JOURNAL'

# A Kubeflow pipeline's GenericTrainer step with several workers launches a
# TrainJob (or TFJob) for them (`kubeflow.step_job`): the compile puts what
# the step cannot know (the job's kind, the image, the resources) in this
# variable of the step's container (JSON); the step gives the job's pods
# the second, where the chief writes what it published.
STEP_JOB_ENV = 'GENERIC_TRAINER_STEP_JOB'
STEP_JOB_RECORD_ENV = 'GENERIC_TRAINER_STEP_JOB_RECORD'
# KFP names the step's pod to its main container (`argocompiler/common.go`):
# the job the step launches is owned by that pod.
KFP_POD_NAME_ENV = 'KFP_POD_NAME'
KFP_POD_UID_ENV = 'KFP_POD_UID'
# Where Kubernetes mounts a pod's service account (token, CA, namespace);
# the step's own account, whose the job's pods run as unless pod_settings
# names one, is read from its token in `launch.cluster_environment`.
SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount'
# Kubeflow Trainer v2.2+ (the controller's `TrainJobStatus` feature gate)
# gives every trainer container its status endpoint: the URL, the CA file
# and the token file, in that order (`pkg/runtime/framework/plugins/
# trainjobstatus/trainjobstatus.go`).
TRAINER_STATUS_ENV = ('KUBEFLOW_TRAINER_SERVER_URL',
                      'KUBEFLOW_TRAINER_SERVER_CA_CERT',
                      'KUBEFLOW_TRAINER_SERVER_TOKEN')
# Every variable a scheduler (or the compile, for a step) sets to tell a
# process where it trains: read in `launch.cluster_environment` alone.
SCHEDULER_ENV = (CLUSTER_PLACE_ENV + (JOBSET_SUBDOMAIN_ENV, JOBSET_PORT_ENV,
                 STEP_JOB_ENV, STEP_JOB_RECORD_ENV, KFP_POD_NAME_ENV,
                 KFP_POD_UID_ENV) + TRAINER_STATUS_ENV)

# How the command names the schema it infers from the train data (eval
# data that differs from it is told the train data's kinds: `data.csv_data`).
INFERRED_SCHEMA = 'the schema inferred from the train data'
