"""Example Triton Python-backend model: returns its input unchanged (OUTPUT0 = INPUT0)."""

import triton_python_backend_utils as pb_utils  # provided by Triton's Python backend


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            output = pb_utils.Tensor("OUTPUT0", tensor.as_numpy())
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
