"""The kinds of job a Kubeflow step launches (`kubeflow.job_kind`,
`kubeflow.kinds`): each answers the questions of `JobKind`, and is found
by its name. Quick: no cluster."""

import pytest

from message_parts import missing_parts
from generic_trainer.errors import InvalidArgumentError
from generic_trainer.kubeflow import kinds
from generic_trainer.kubeflow.job_kind import JobKind

KINDS = pytest.mark.parametrize('kind', kinds.KINDS, ids=lambda k: k.name)


def test_each_kind_is_found_by_its_name():
  """`named` finds the TrainJob and the TFJob by the names the compile and
  the API spell; the TrainJob is the default."""
  assert kinds.NAMES == ('TrainJob', 'TFJob')
  for kind in kinds.KINDS:
    assert isinstance(kind, JobKind)
    assert kinds.named(kind.name) is kind
  assert kinds.DEFAULT is kinds.named('TrainJob')


def test_an_unknown_kind_is_refused_with_the_kinds_there_are():
  """A name no kind has is refused, naming the kinds."""
  with pytest.raises(InvalidArgumentError, match=(
      r"must be one of \('TrainJob', 'TFJob'\).*Received: 'PyTorchJob'")):
    kinds.named('PyTorchJob')


@KINDS
def test_a_kind_renders_its_job_and_the_objects_beside_it(kind):
  """`render` gives the job under `job_key`, of the kind's API, and each
  companion under its key, named after the job."""
  objects = kind.render('gt-abc', 2, 1, {'A': 'b'}, image='img',
                        command=['python'], args=['x'], namespace='ns',
                        resources=None, pod_settings=None)
  assert set(objects) == {kind.job_key} | {c.key for c in kind.companions}
  job = objects[kind.job_key]
  assert (job['apiVersion'], job['kind']) == (kind.api_version, kind.name)
  for companion in kind.companions:
    assert objects[companion.key]['metadata']['name'] == (
        'gt-abc' + companion.suffix)


@KINDS
def test_a_kind_takes_the_longest_name_it_names_and_no_longer(kind):
  """`check_name` takes `longest_name(n)` characters and refuses one
  more."""
  longest = kind.longest_name(3)
  kind.check_name('a' * longest, 3)
  with pytest.raises(InvalidArgumentError, match='name'):
    kind.check_name('a' * (longest + 1), 3)


@KINDS
def test_a_kind_reads_a_jobs_end_from_its_conditions(kind):
  """`ended`: done or failed by the kind's condition types when True, with
  the condition's reason and message; '' while it runs."""

  def job(*conditions):
    return {'status': {'conditions': [
        {'type': type_, 'status': status, 'reason': 'R', 'message': 'M'}
        for type_, status in conditions]}}

  assert kind.ended(job((kind.complete, 'True'))) == ('done', 'R', 'M')
  assert kind.ended(job((kind.failed, 'True'))) == ('failed', 'R', 'M')
  assert kind.ended(job((kind.failed, 'False'))) == ('', '', '')
  assert kind.ended({'status': None}) == ('', '', '')


@KINDS
def test_the_calls_a_kind_needs_are_its_own_and_its_pods(kind):
  """`api_calls`: the job's resource in its API group, each companion's,
  the pods' and the events'; none twice."""
  calls = kind.api_calls
  assert len(calls) == len(set(calls))
  assert {resource for _, resource, _ in calls} == {
      kind.plural, 'pods', 'pods/log', 'events'} | {
          c.plural for c in kind.companions}
  assert {group for group, _, _ in calls} == {kind.group, ''}


def test_a_kind_that_leaves_a_question_unanswered_is_refused():
  """A new kind without its plural fails when its class is defined."""
  with pytest.raises(TypeError, match=r"must set \['plural'\]") as raised:

    class _Half(JobKind):  # pylint: disable=unused-variable
      name, api_version, job_key = 'HalfJob', 'example.org/v1', 'halfjob'
      pod_selector, container, complete = 'example.org/job', 'main', 'Done'
      operator = 'nothing'
  assert not missing_parts(str(raised.value))
