//! The estimated chance that a decision works out, given the signals seen so far.
//!
//! A Beta belief: the prior is centred on `prior_mean` (the module's calibrated success rate
//! when it has enough outcomes, else the confidence stated for the decision) with the weight of
//! [`PRIOR_STRENGTH`] observations. Each positive signal adds its type's weight
//! ([`SignalType::weight`]) to the successes, each negative one to the failures; neutral
//! signals add nothing. The estimate is the posterior mean:
//!
//! ```text
//! (prior_mean · PRIOR_STRENGTH + Σ positive weights) / (PRIOR_STRENGTH + Σ positive + Σ negative)
//! ```
//!
//! so a confidence of 0.8 followed by a passing CI run gives (1.6 + 1) / 3 = 0.867.

use crate::decision::model::{Signal, Valence};

/// How many observations the prior counts for.
const PRIOR_STRENGTH: f64 = 2.0;

/// The posterior mean chance of success after `signals`.
pub fn estimated_success(prior_mean: f64, signals: &[Signal]) -> f64 {
    let (mut positive, mut negative) = (0.0, 0.0);
    for signal in signals {
        match signal.valence {
            Valence::Positive => positive += signal.signal_type.weight(),
            Valence::Negative => negative += signal.signal_type.weight(),
            Valence::Neutral => {}
        }
    }
    let prior_mean = prior_mean.clamp(0.0, 1.0);
    (prior_mean * PRIOR_STRENGTH + positive) / (PRIOR_STRENGTH + positive + negative)
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::decision::model::{DecisionId, SignalType};

    fn signal(signal_type: SignalType, valence: Valence) -> Signal {
        Signal {
            id: "sig_1".into(),
            decision_id: DecisionId::parse("dec_1").unwrap(),
            signal_type,
            valence,
            description: None,
            metrics: Default::default(),
            recorded_at: Utc::now(),
        }
    }

    #[test]
    fn signals_move_the_estimate_by_their_weight() {
        assert_eq!(estimated_success(0.8, &[]), 0.8);
        let passed = estimated_success(0.8, &[signal(SignalType::CiPassed, Valence::Positive)]);
        assert!((passed - 2.6 / 3.0).abs() < 1e-12);
        // An incident weighs two observations: (1.6 + 1) / (2 + 1 + 2).
        let incident = estimated_success(
            0.8,
            &[signal(SignalType::CiPassed, Valence::Positive), signal(SignalType::Incident, Valence::Negative)],
        );
        assert!((incident - 2.6 / 5.0).abs() < 1e-12);
        assert_eq!(estimated_success(0.5, &[signal(SignalType::Performance, Valence::Neutral)]), 0.5);
    }
}
