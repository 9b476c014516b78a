# The image of the Kubeflow penguin pipeline: every step runs in it, the
# trainer step included (README.md, "Scaling out"). Build from the repository
# root:
#   docker build -t REGISTRY/tfx-generic-trainer:0.1.0 . && docker push REGISTRY/tfx-generic-trainer:0.1.0
# It holds Python 3.10, the pinned lock, this package, the module files
# (importable: module_path='penguin_keras') and the penguin CSV (/pipeline/data).
FROM python:3.10-slim

WORKDIR /pipeline

# The pinned dependencies first: a code change reuses this layer.
COPY requirements/lock.txt requirements/lock.txt
RUN pip install --no-cache-dir uv \
 && uv pip install --system --no-cache -r requirements/lock.txt

COPY setup.py pyproject.toml README.md LICENSE ./
COPY generic_trainer generic_trainer
COPY pipelines pipelines
COPY module_files module_files
RUN uv pip install --system --no-cache --no-deps . \
 && python -c "from pipelines.penguin_data import write_penguin_csv; write_penguin_csv('/pipeline/data')"

ENV PYTHONPATH=/pipeline/module_files \
    PYTHONUNBUFFERED=1

# KubeflowV2DagRunner and the TFJob give this command themselves; it is the
# entrypoint too, for `docker run IMAGE --executor_class_path ... `.
ENTRYPOINT ["python", "-m", "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"]
