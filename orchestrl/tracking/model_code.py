"""MLflow's "models from code" entry of the policy model (``orchestrl.tracking.models``).

MLflow copies this file into the logged model and runs it when the model is loaded; it names the
model object, so nothing is pickled.
"""

import mlflow

from orchestrl.tracking.models import PolicyModel

mlflow.models.set_model(PolicyModel())
