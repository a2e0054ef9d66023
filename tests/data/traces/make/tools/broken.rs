use std::collections::HashMap;

fn tool_names(tools: &HashMap<String, u32>) -> Vec<&str> {
    tools.keys().map(|k| k.as_str()).collect()
}

fn main() {
    let mut tools = HashMap::new();
    tools.insert("search".to_string(), 1u32);
    let names = tool_names(&tools);
    tools.insert("fetch".to_string(), 2);
    let count: u32 = names.len();
    println!("{names:?} {count}");
}
