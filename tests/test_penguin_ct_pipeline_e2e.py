"""The continuous-training pipeline, three days end to end: a rolling window
of spans, warm start from the blessed model, and the publication gate."""

import glob
import json
import os
import textwrap

import pytest

from conftest import REPO


def _latest_execution_inputs(store, component):
  """The input artifacts of the latest execution of a component class."""
  from ml_metadata.proto import metadata_store_pb2  # pylint: disable=g-import-not-at-top
  (type_name,) = [t.name for t in store.get_execution_types()
                  if t.name.endswith(component)]
  executions = store.get_executions_by_type(type_name)
  latest = max(executions, key=lambda e: e.id)
  events = store.get_events_by_execution_ids([latest.id])
  ids = [e.artifact_id for e in events
         if e.type == metadata_store_pb2.Event.INPUT]
  return store.get_artifacts_by_id(ids)


def _records(uris, split):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  files = [f for uri in uris
           for f in glob.glob(os.path.join(uri, f'Split-{split}', '*'))]
  return sum(1 for _ in tf.data.TFRecordDataset(files, 'GZIP'))


@pytest.mark.slow
def test_three_days_of_continuous_training(tmp_path):
  """Day 1 trains from scratch; day 2 trains on spans 1 and 2, warm-started
  from day 1's blessed model, below a cold start's first-epoch loss; day 3,
  with a module that stops reading an input, is refused by the gate and
  nothing is pushed."""
  from tfx.orchestration import metadata  # pylint: disable=g-import-not-at-top
  from generic_trainer import Estimator  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import SignatureChangeError  # pylint: disable=g-import-not-at-top
  from pipelines import penguin_ct_pipeline_local as ct  # pylint: disable=g-import-not-at-top
  out = str(tmp_path / 'ct')
  day1 = ct.run(out, 1)
  assert day1['blessed'] and day1['pushed_model']
  day2 = ct.run(out, 2)
  assert day2['pushed_model'] and day2['pushed_model'] != day1['pushed_model']

  config = metadata.sqlite_metadata_connection_config(day2['metadata_path'])
  with metadata.Metadata(config) as m:
    inputs = _latest_execution_inputs(m.store, 'GenericTrainer')
    examples_type = m.store.get_artifact_type('Examples').id
    models = m.store.get_artifacts_by_type('Model')
    model_run = max(m.store.get_artifacts_by_type('ModelRun'),
                    key=lambda a: a.id)
    kept = sorted(m.store.get_artifacts_by_type('ParsedRows'),
                  key=lambda a: a.id)
  examples = [a for a in inputs if a.type_id == examples_type]
  spans = sorted((a.properties.get('span') or
                  a.custom_properties['span']).int_value for a in examples)
  assert spans == [1, 2]
  base = [a for a in inputs if a.id in {x.id for x in models}]
  assert len(base) == 1  # Day 1's blessed model, as base_model.
  latest_model = max(models, key=lambda a: a.id)
  assert latest_model.custom_properties['warm_start_layers'].int_value == 4

  # Day 2 read span 1's parsed rows back (train and eval files), parsed
  # span 2's; both days' decisions are in ML Metadata.
  assert [a.custom_properties['hits'].int_value for a in kept] == [0, 2]
  assert [a.custom_properties['misses'].int_value for a in kept] == [2, 2]
  decisions = json.loads(kept[1].custom_properties['decisions'].string_value)
  by_span = {span.split('/')[-2]: {d['decision'] for d in files}
             for span, files in decisions.items()}
  assert sorted(by_span.values(), key=sorted) == [{'hit'}, {'miss'}], (
      decisions)

  # The same training from scratch on the same rows starts far higher.
  with open(os.path.join(model_run.uri, 'history.json')) as f:
    warm_first = json.load(f)[0]['loss']
  uris = [a.uri for a in examples]
  assert _records(uris, 'train') > _records(uris[:1], 'train')
  train_files = [f for uri in uris
                 for f in glob.glob(os.path.join(uri, 'Split-train', '*'))]
  eval_files = [f for uri in uris
                for f in glob.glob(os.path.join(uri, 'Split-eval', '*'))]
  from spec_fixtures import penguin_spec  # pylint: disable=g-import-not-at-top
  cold = Estimator(penguin_spec.PenguinSpec, str(tmp_path / 'cold'))
  cold.train(train_files, eval_data=eval_files, steps=ct.TRAIN_STEPS)
  with open(os.path.join(cold.run_dir, 'history.json')) as f:
    cold_first = json.load(f)[0]['loss']
  print(f'day 2 first-epoch loss: warm {warm_first:.3f}, cold '
        f'{cold_first:.3f}')
  assert warm_first < cold_first

  # Day 3: a module whose model no longer reads body_mass_g.
  module = tmp_path / 'three_features.py'
  module.write_text(textwrap.dedent(f'''
      import sys
      sys.path.insert(0, {os.path.join(REPO, 'module_files')!r})
      import keras
      from penguin_spec import FEATURES, PenguinSpec

      KEPT = FEATURES[:3]

      class ThreeFeatures(PenguinSpec):
        feature_keys = KEPT

        def build_model(self):
          inputs = {{k: keras.Input(shape=(1,), name=k) for k in KEPT}}
          x = keras.layers.Concatenate()([inputs[k] for k in KEPT])
          x = keras.layers.Dense(8, activation='relu')(x)
          return keras.Model(inputs, keras.layers.Dense(
              3, activation='softmax')(x))
      '''))
  with pytest.raises(Exception) as info:
    ct.run(out, 3, module_file=str(module))
  chain, error = [], info.value
  while error is not None:
    chain.append(error)
    error = error.__cause__ or error.__context__
  gate = [e for e in chain if isinstance(e, SignatureChangeError)]
  assert gate, chain
  assert "input 'body_mass_g' removed" in str(gate[0])
  assert sorted(os.listdir(day2['serving_model_dir'])) == sorted(
      os.path.basename(p) for p in (day1['pushed_model'],
                                    day2['pushed_model']))
