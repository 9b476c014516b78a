"""tfx-generic-trainer: a TFX trainer component with deep export checks."""

import setuptools

setuptools.setup(
    name='tfx-generic-trainer',
    version='0.1.0',
    description=('GenericTrainer: a drop-in replacement for '
                 'tfx.components.Trainer that validates what it exports.'),
    long_description=open('README.md').read(),
    long_description_content_type='text/markdown',
    packages=setuptools.find_packages(
        include=['generic_trainer', 'generic_trainer.*']),
    # `generic-trainer --module-file M --train-data D --output-dir DIR`:
    # README.md, "Run a module without a pipeline".
    entry_points={
        'console_scripts': ['generic-trainer = generic_trainer.local.cli:main'],
    },
    python_requires='>=3.10,<3.11',
    # Pinned versions live in requirements/lock.txt; these are the ranges.
    install_requires=['tfx[kfp]>=1.16,<1.17', 'dill', 'pip'],
    extras_require={'examples': ['palmerpenguins'], 'test': ['pytest']},
)
