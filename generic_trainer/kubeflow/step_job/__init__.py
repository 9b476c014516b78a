"""A Kubeflow pipeline step that trains on several pods: it launches a
TrainJob (or a TFJob) for them, follows it to its end, and takes its model.

Open-source Kubeflow Pipelines runs a step as one pod. When the compiled
GenericTrainer step asks for several workers (`compile.compile_pipeline`
puts `keys.STEP_JOB_ENV` in its container: the job's kind, the image and
the resources, which the step cannot know at run time), the step, in its
pod and with its pod's service account (in-cluster configuration, the
`kubernetes` client), does this instead of training itself (`step.run`):

  1. renders the job from what the step was started with: TFX's KFP
     entrypoint and its own arguments (the ExecutorInput, with the
     executor-output file moved into each pod's /tmp), the component's
     `num_workers` (a range's most), `max_restarts` and `pod_settings`
     (`render`, through the kind's `job_kind.JobKind.render`). Its name is
     derived from the step's Model artifact URI, so every attempt of the
     step names the same job;
  2. finds a job of an earlier attempt of the step by that name
     (`takeover`): one of ours (our label and the same Model URI) with the
     same spec, still running or complete, is reused; one that failed or
     differs is deleted (foreground: its pods are gone first) and made
     again; a job of that name that is not ours is neither used nor
     deleted: the step fails and says so. Each new job is owned by the
     step's pod (`ownerReferences`, from KFP's `KFP_POD_NAME` and
     `KFP_POD_UID`), so Kubernetes removes it with the pod whatever ends
     the step;
  3. follows it (`follow`: a watch from the resource version it read, read
     again after an expired one) to its end, logging the progress the
     chief reports (`loop.handlers.trainjob_progress`) and the restarts:
       - complete: the chief has trained, validated and published into the
         step's Model artifact, and written what it attached to the output
         artifacts to `keys.STEP_JOB_RECORD_ENV`'s file (`record`); the
         step checks the record names this job and the SavedModel is
         there, and takes the custom properties: TFX's entrypoint then
         writes the executor-output file, and Evaluator and Pusher take
         the model;
       - failed: StepJobError with the job's reason and the last lines of
         the failing pod's log; nothing is published;
       - SIGTERM to the step (the run cancelled): the job is deleted (its
         pods get SIGTERM and save their step, as a preempted training
         does) and PreemptedError says where the training resumes (the
         ModelRun artifact's checkpoint, on the next run).

A restart within the job is the job's own (TrainJob: the JobSet's
`failurePolicy.maxRestarts`; TFJob: the replicas' `OnFailure` policy):
the group resumes from its last saved step.

The modules, one idea each: `render` (what the compile asks for, the job's
name, its pods' arguments, its objects), `client` (the Kubernetes calls
the step makes, `client.Cluster`, and the clear errors of a refusal),
`takeover` (an earlier attempt's job reused or removed, a new one made
and owned), `follow` (the job watched to its end), `record` (the chief's
record of what it published, written and taken), `bound` (the job's own
pods delete it once its step's pod has ended, killed without SIGTERM and
left without pod GC), `step` (the step's
run, tying them together), `rbac` (the Role and RoleBinding of exactly
the calls the kind needs, `job_kind.JobKind.api_calls`) and `__main__`
(`python -m generic_trainer.kubeflow.step_job rbac SERVICE_ACCOUNT
NAMESPACE [TrainJob|TFJob]`).

May import: `kubeflow` (the job kinds, names, resources, pod settings),
`plan` (the worker range) and the base.
"""
