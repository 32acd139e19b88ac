# TorchScript: weights_only refuses it and torch.jit.load runs its code: unsafe, exit 4
"$T" inspect -q "$S/torchscript_scripted.pt"
