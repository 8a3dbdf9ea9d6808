"""Run-spec presets for real stacks (`harness init --preset NAME`): commented YAML files whose
@HOST@, @TRANSPORT@ and @WORKDIR@ are filled in by harness.spec_template.write_preset."""
