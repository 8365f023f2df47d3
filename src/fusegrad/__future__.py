"""Switches for behaviour that PyTorch plans to change (`torch.__future__`): how
`Module.to()`/`.double()`/`._apply` convert a module's parameters."""

# False (the default): a conversion points the existing parameter objects at the converted
# data (`param.data = new`). True: each parameter is replaced by a new Parameter.
_overwrite_module_params_on_conversion: bool = False
# True: a conversion swaps the converted contents into the existing parameter objects
# (`fusegrad.utils.swap_tensors`), as does `load_state_dict`; wins over the overwrite switch.
_swap_module_params_on_conversion: bool = False


def set_overwrite_module_params_on_conversion(value: bool) -> None:
    """Whether converting a module gives it new Parameter objects (True) or keeps the old
    ones, pointed at the converted data (False, the default)."""
    global _overwrite_module_params_on_conversion
    _overwrite_module_params_on_conversion = value


def get_overwrite_module_params_on_conversion() -> bool:
    """The value `set_overwrite_module_params_on_conversion` set (False by default)."""
    return _overwrite_module_params_on_conversion


def set_swap_module_params_on_conversion(value: bool) -> None:
    """Whether converting a module, and loading a state dict into it, swap the new
    contents into its existing parameter objects (`swap_tensors`): their identity stays,
    their Python attributes go with the old contents."""
    global _swap_module_params_on_conversion
    _swap_module_params_on_conversion = value


def get_swap_module_params_on_conversion() -> bool:
    """The value `set_swap_module_params_on_conversion` set (False by default)."""
    return _swap_module_params_on_conversion
