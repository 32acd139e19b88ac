class Net(Module):
  __parameters__ = ["w", ]
  __buffers__ = []
  w : Tensor
  __annotations__["0"] = __torch__.Sub
  c : Final[int] = 3
  def forward(self: __torch__.Net, x: Tensor) -> Tensor:
    """doc
  __parameters__ = ["secret"]
"""
    y = torch.add(x,
  __buffers__ = ["b"]
      x)  # (
    return y
  __parameters__ = ['w' "v", ]
  wv : Tensor
