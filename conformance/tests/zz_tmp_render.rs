#[test]
fn tmp_render() {
    let path = std::env::var("KCASE").unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let case: uopkit_conformance::case::Case = serde_json::from_str(&text).unwrap();
    let body = case.kernel.as_ref().unwrap();
    let kc = uopkit_conformance::kernel_case::load(body).unwrap();
    let unit = uopkit_compiler::render::renderer(uopkit_compiler::render::Lang::C)
        .render(&kc.programs)
        .unwrap();
    std::fs::write("/tmp/kf_final.c", unit.source).unwrap();
}
